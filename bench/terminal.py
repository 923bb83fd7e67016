"""Process actors: spawn cost, and time from cancel to a whole tree gone.

Run: python bench/terminal.py
- spawn: median time to run `true` through a hermes TerminalSession (guards,
  bash -c, its own session, bounded output, cwd tracking, leftover check)
  against subprocess.run(["bash", "-c", "true"]) doing the same exec;
- sandbox: the same `true` placed in the bubblewrap sandbox (a user's command) against
  subprocess.run of the very bwrap command line hermes builds (where bwrap works);
- kill: from cancelling the scope that runs a tree to every process of it
  gone, for a tree that obeys SIGTERM and for one whose child ignores it.
Last line: RESULT spawn_ratio=<x> sandbox_ratio=<s> kill_ms=<a> kill_ignoring_ms=<b>
grace_ms=<g>
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import trio

from hermes.terminal.backends.base import Launch, Shell
from hermes.terminal.command import OutputPump, spawned
from hermes.terminal.placement import backends_for
from hermes.terminal.reaper import become_subreaper
from hermes.terminal.session import TerminalSession
from hermes.terminal.settings import TerminalConfig

RUNS = 200
KILLS = 5
GRACE = 1.0

OBEYS = "sleep 300 & sleep 300 & echo ready; wait"
IGNORES = "(trap '' TERM; echo ready; sleep 300; sleep 300) & wait"


def baseline_times(runs: int, argv: tuple[str, ...] = ("bash", "-c", "true")) -> list[float]:
    """subprocess.run, outside Trio (it blocks), before and after hermes's runs."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True)
        times.append(time.perf_counter() - start)
    # bwrap's namespace init outlives it and, this process being a subreaper, is ours:
    # reaped here (nothing else runs now), or hermes's tree scans would walk the zombies
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return times


async def spawn_times(tmp: Path, role: str = "owner") -> list[float]:
    backends = backends_for(TerminalConfig(), tmp)
    session = TerminalSession(tmp, state_dir=tmp / ".term", backends=backends)
    placement = backends.place(role)
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = await session.run("true", placement=placement)
        times.append(time.perf_counter() - start)
        assert result.exit_code == 0
    return times


def bwrap_argv(tmp: Path) -> tuple[str, ...] | None:
    """The bwrap command line hermes builds for a user's `true` (no --info-fd: nothing
    reads it here), or None where bubblewrap does not work."""
    sandbox = backends_for(TerminalConfig(), tmp).sandbox
    if sandbox is None:
        return None
    launch = sandbox.launch(Shell("true", str(tmp), {"PATH": "/usr/bin:/bin"}, tmp))
    launch.discard()
    argv = list(launch.argv)
    at = argv.index("--info-fd")
    return tuple(argv[:at] + argv[at + 2 :])


async def kill_time(tmp: Path, command: str) -> float:
    ready = trio.Event()

    def sink(text: str) -> None:
        if "ready" in text:
            ready.set()

    with trio.CancelScope() as scope:
        async with spawned(
            Launch(("bash", "-c", command), tmp, dict(os.environ)), grace=GRACE
        ) as c:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(OutputPump(sink).run, c.process.stdout)
                await ready.wait()
                start = time.perf_counter()
                scope.cancel()
                await trio.sleep_forever()
    return time.perf_counter() - start  # the block exits once the tree is gone


async def measure(root: Path, sandboxed: bool) -> tuple[float, float | None, float, float]:
    ours = statistics.median(await spawn_times(root))
    boxed = statistics.median(await spawn_times(root, "user")) if sandboxed else None
    obeys = statistics.median([await kill_time(root, OBEYS) for _ in range(KILLS)])
    ignores = statistics.median([await kill_time(root, IGNORES) for _ in range(KILLS)])
    return ours, boxed, obeys, ignores


def main() -> None:
    become_subreaper()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bwrap = bwrap_argv(root)
        before = baseline_times(RUNS // 2)
        box_before = baseline_times(RUNS // 2, bwrap) if bwrap else []
        ours, boxed, obeys, ignores = trio.run(measure, root, bwrap is not None)
        raw = statistics.median(before + baseline_times(RUNS // 2))
        box_raw = statistics.median(box_before + baseline_times(RUNS // 2, bwrap)) if bwrap else 0
    print(f"run `true`      subprocess.run {raw * 1000:6.2f} ms   hermes {ours * 1000:6.2f} ms")
    if boxed is not None:
        print(f"sandboxed       subprocess.run(bwrap) {box_raw * 1000:6.2f} ms   hermes"
              f" {boxed * 1000:6.2f} ms")  # fmt: skip
    else:
        print("sandboxed       (bubblewrap does not work here: not measured)")
    print(f"cancel -> gone  obeys SIGTERM {obeys * 1000:7.1f} ms")
    print(f"cancel -> gone  ignores SIGTERM {ignores * 1000:5.1f} ms (grace {GRACE * 1000:.0f} ms)")
    print(
        f"RESULT spawn_ratio={ours / raw:.2f}"
        f" sandbox_ratio={boxed / box_raw if boxed else float('nan'):.2f}"
        f" kill_ms={obeys * 1000:.0f} kill_ignoring_ms={ignores * 1000:.0f}"
        f" grace_ms={GRACE * 1000:.0f}"
    )


if __name__ == "__main__":
    main()
