"""CPU used during a bench phase, by the bench's processes and by everything else.

Shared by the benches (run as `python bench/NAME.py`, so this directory is on
sys.path): a figure is only this code's when the rest of the machine was quiet.
"""

from __future__ import annotations

import contextlib
import os
import time

import psutil


class CpuWatch:
    """The CPU seconds each of `pids` (with its children, but the bench alone) used
    during a phase, and what the rest of the machine took meanwhile, in CPUs (1.0:
    one core busy); other work on a small machine (tests run beside the bench)
    shows in the tail."""

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
