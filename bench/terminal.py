"""Process actors: spawn cost, and time from cancel to a whole tree gone.

Run: python bench/terminal.py
- spawn: median time to run `true` through a hermes TerminalSession (guards,
  bash -c, its own session, bounded output, cwd tracking, leftover check)
  against subprocess.run(["bash", "-c", "true"]) doing the same exec;
- kill: from cancelling the scope that runs a tree to every process of it
  gone, for a tree that obeys SIGTERM and for one whose child ignores it.
Last line: RESULT spawn_ratio=<x> kill_ms=<a> kill_ignoring_ms=<b> grace_ms=<g>
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import trio

from hermes.terminal.command import OutputPump, spawned
from hermes.terminal.reaper import become_subreaper
from hermes.terminal.session import TerminalSession

RUNS = 200
KILLS = 5
GRACE = 1.0

OBEYS = "sleep 300 & sleep 300 & echo ready; wait"
IGNORES = "(trap '' TERM; echo ready; sleep 300; sleep 300) & wait"


def baseline_times(runs: int) -> list[float]:
    """subprocess.run, outside Trio (it blocks), before and after hermes's runs."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        times.append(time.perf_counter() - start)
    return times


async def spawn_times(tmp: Path) -> list[float]:
    session = TerminalSession(tmp, state_dir=tmp / ".term")
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = await session.run("true")
        times.append(time.perf_counter() - start)
        assert result.exit_code == 0
    return times


async def kill_time(tmp: Path, command: str) -> float:
    ready = trio.Event()

    def sink(text: str) -> None:
        if "ready" in text:
            ready.set()

    with trio.CancelScope() as scope:
        async with spawned(
            ["bash", "-c", command], cwd=tmp, env=dict(os.environ), grace=GRACE
        ) as c:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(OutputPump(sink).run, c.process.stdout)
                await ready.wait()
                start = time.perf_counter()
                scope.cancel()
                await trio.sleep_forever()
    return time.perf_counter() - start  # the block exits once the tree is gone


async def measure(root: Path) -> tuple[float, float, float]:
    ours = statistics.median(await spawn_times(root))
    obeys = statistics.median([await kill_time(root, OBEYS) for _ in range(KILLS)])
    ignores = statistics.median([await kill_time(root, IGNORES) for _ in range(KILLS)])
    return ours, obeys, ignores


def main() -> None:
    become_subreaper()
    with tempfile.TemporaryDirectory() as tmp:
        before = baseline_times(RUNS // 2)
        ours, obeys, ignores = trio.run(measure, Path(tmp))
        raw = statistics.median(before + baseline_times(RUNS // 2))
    print(f"run `true`      subprocess.run {raw * 1000:6.2f} ms   hermes {ours * 1000:6.2f} ms")
    print(f"cancel -> gone  obeys SIGTERM {obeys * 1000:7.1f} ms")
    print(f"cancel -> gone  ignores SIGTERM {ignores * 1000:5.1f} ms (grace {GRACE * 1000:.0f} ms)")
    print(
        f"RESULT spawn_ratio={ours / raw:.2f} kill_ms={obeys * 1000:.0f} "
        f"kill_ignoring_ms={ignores * 1000:.0f} grace_ms={GRACE * 1000:.0f}"
    )


if __name__ == "__main__":
    main()
