"""What the benches share: child processes, percentiles, and the CPU a phase used.

The benches run as `python bench/NAME.py`, so this directory is on sys.path and
`from common import ...` finds this file; each bench puts the repository root
there too, for `hermes` and `tests.fakes`.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def start_child(argv: list[str]) -> tuple[subprocess.Popen, str]:
    """A helper process (run from the repository root) that prints one line, its
    address, when it is ready; the process and that line."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        kill(proc)
        raise SystemExit(f"{' '.join(argv[1:])} did not start")
    return proc, line


def start_fake(name: str, *args: str) -> tuple[subprocess.Popen, str]:
    """The fake `tests/fakes/<name>.py` in its own process; the process and its URL."""
    return start_child([sys.executable, "-m", f"tests.fakes.{name}", *args])


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] * 1000


class CpuWatch:
    """The CPU seconds each of `pids` (with its children, but the bench alone) used
    during a phase, and what the rest of the machine took meanwhile, in CPUs (1.0:
    one core busy); other work on a small machine (tests run beside the bench)
    shows in the tail. A figure is only this code's when the rest was quiet."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.start = self._sample()
        self.others = 0.0
        self.used: list[float] = []

    def _sample(self) -> tuple[float, float, list[float]]:
        cpu = psutil.cpu_times()
        extra = sum(getattr(cpu, name, 0.0) for name in ("irq", "softirq", "steal"))
        busy = cpu.user + cpu.nice + cpu.system + extra  # guest time is already in user
        ours = [0.0] * len(self.pids)
        for i, pid in enumerate(self.pids):
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                # serve's writer, but not the bench's own children (serve, the fake)
                children = process.children(recursive=True) if pid != os.getpid() else []
                for part in (process, *children):
                    with contextlib.suppress(psutil.NoSuchProcess):
                        times = part.cpu_times()
                        ours[i] += times.user + times.system
        return time.monotonic(), busy, ours

    def stop(self) -> None:
        (t0, busy0, ours0), (t1, busy1, ours1) = self.start, self._sample()
        self.used = [b - a for a, b in zip(ours0, ours1, strict=True)]  # CPU seconds, per pid
        self.others = max(0.0, (busy1 - busy0) - sum(self.used)) / (t1 - t0)
