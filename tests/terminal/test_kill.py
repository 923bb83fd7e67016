"""Whole-tree kills with real processes: cancel, timeout, a pipe held open, huge output."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
import trio
import trio.testing

from hermes.terminal.backends.base import Launch
from hermes.terminal.command import OutputPump, RunOptions, run_command, spawned
from hermes.terminal.tree import ProcessId, TreeKiller, _stat

GRACE = 1.0
ENV = dict(os.environ)


def gone(proc: ProcessId) -> bool:
    """Not running and not a zombie: reaped, or the pid now names another process."""
    stat = _stat(proc.pid)
    return stat is None or stat[1] != proc.started


async def test_cancel_kills_a_hostile_tree_within_grace(tmp_path):
    levels: dict[int, ProcessId] = {}
    all_ready = trio.Event()

    def sink(text: str) -> None:
        for line in text.splitlines():
            if line.startswith("ready "):
                _, level, pid = line.split()
                levels[int(level)] = ProcessId.of(int(pid))
        if len(levels) == 4:
            all_ready.set()

    argv = [sys.executable, "-m", "tests.terminal.tree_maker", "0"]
    with trio.CancelScope() as scope:
        async with spawned(Launch(tuple(argv), Path.cwd(), ENV), grace=GRACE) as child:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(OutputPump(sink).run, child.process.stdout)
                await all_ready.wait()
                # level 3 left the tree: its own session, its parent exited
                assert os.getsid(levels[3].pid) != os.getsid(levels[0].pid)
                assert psutil.Process(levels[3].pid).ppid() != levels[2].pid
                started = time.monotonic()
                scope.cancel()
                await trio.sleep_forever()
    elapsed = time.monotonic() - started
    assert scope.cancelled_caught
    assert elapsed < GRACE + 10.0, elapsed  # the grace, then SIGKILL: not the 300 s
    assert all(gone(p) for p in levels.values()), levels


async def test_timeout_gives_124_and_kills_the_tree(tmp_path):
    pidfile = tmp_path / "bg.pid"
    result = await run_command(
        Launch(("bash", "-c", f"sleep 300 & echo $! > {pidfile}; sleep 300"), tmp_path, ENV),
        options=RunOptions(timeout=0.5, grace=GRACE),
    )
    assert result.exit_code == 124
    assert result.status == "timeout"
    assert "timed out after 0.5s" in result.output
    background = int(pidfile.read_text())
    assert _stat(background) is None or _stat(background)[0] in "ZX"


async def test_held_pipe_delays_result_by_at_most_the_drain_bound(tmp_path):
    # The leader exits at once; its grandchild keeps stdout open for a minute.
    started = time.monotonic()
    result = await run_command(
        Launch(("bash", "-c", "(exec -a holder sleep 60) & echo leader done"), tmp_path, ENV),
        options=RunOptions(drain_idle=0.3, grace=GRACE),
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 0
    assert result.output.strip() == "leader done"
    assert elapsed < 10, elapsed  # drain bound + spawn + leftover kill: not the 60 s


async def test_huge_output_keeps_memory_bounded(tmp_path):
    me = psutil.Process()
    before = me.memory_info().rss
    result = await run_command(
        Launch(
            ("bash", "-c", "echo FIRST; head -c 200000000 /dev/zero | tr '\\0' x; echo; echo LAST"),
            tmp_path,
            ENV,
        ),
        options=RunOptions(cap=50_000, spill_dir=tmp_path / "spill"),
    )
    growth = me.memory_info().rss - before
    assert result.exit_code == 0
    assert growth < 60 * 1024 * 1024, growth
    assert result.output.startswith("FIRST\n")
    assert result.output.rstrip().endswith("LAST")
    assert "characters cut" in result.output
    assert len(result.output) < 50_500
    full = Path(result.full_output_path)
    assert full.stat().st_size > 200_000_000
    assert oct(full.stat().st_mode & 0o777) == "0o600"


async def test_exit_status_of_the_leader_is_reported(tmp_path):
    result = await run_command(Launch(("bash", "-c", "exit 7"), tmp_path, ENV))
    assert result.exit_code == 7 and result.status == "ok"


async def test_interrupt_gives_130(tmp_path):
    interrupt = trio.Event()
    async with trio.open_nursery() as nursery:

        async def run():
            nonlocal result
            result = await run_command(
                Launch(("bash", "-c", "echo started; sleep 300"), tmp_path, ENV),
                interrupt=interrupt,
                options=RunOptions(grace=GRACE),
            )

        result = None
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        interrupt.set()
    assert result.exit_code == 130
    assert result.status == "interrupted"


async def reused(new_session: bool = False) -> tuple[trio.Process, ProcessId, ProcessId]:
    """A live `sleep`, its ProcessId, and a ProcessId of the same pid with another start
    time: what a recorded process looks like once its pid names an unrelated process."""
    child = await trio.lowlevel.open_process(["sleep", "1000"], start_new_session=new_session)
    real = ProcessId.of(child.pid)
    assert real is not None and real.alive()
    return child, real, ProcessId(real.pid, real.started - 1)


async def ended_by(child: trio.Process, real: ProcessId) -> int:
    """Send SIGUSR1 to the child and say which signal ended it.

    The first deadly signal sent to a process decides its exit status (the
    kernel marks the group as exiting at once), so a SIGKILL or SIGTERM that
    had been sent before would show here instead of SIGUSR1.
    """
    real.signal(signal.SIGUSR1)
    with trio.fail_after(10):
        return -(await child.wait())


async def finish(*procs: trio.Process) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_a_reused_pid_is_never_signalled():
    """A ProcessId whose start time does not match is not alive and signal() sends nothing."""
    child, real, stale = await reused()
    try:
        assert not stale.alive()
        stale.signal(signal.SIGKILL)
        assert real.alive()
        assert await ended_by(child, real) == signal.SIGUSR1
    finally:
        await finish(child)


@pytest.mark.parametrize(
    "new_session",
    [
        False,
        True,
    ],
    ids=["in-our-group", "leads-its-own-group"],
)
async def test_tree_killer_never_signals_a_reused_pid(new_session):
    """Killing the tree of a leader whose pid was reused leaves the new process alone."""
    child, real, stale = await reused(new_session)
    try:
        killer = TreeKiller(stale)
        await killer.kill(grace=GRACE)
        assert killer.alive() == []
        assert real.alive()
        assert await ended_by(child, real) == signal.SIGUSR1
    finally:
        await finish(child)


async def test_tree_killer_spares_a_reused_pid_it_had_seen_in_the_tree():
    """A descendant recorded earlier whose pid now names another process is not signalled
    when the rest of the tree is killed."""
    child, real, stale = await reused()
    leader = await trio.lowlevel.open_process(["sleep", "1000"], start_new_session=True)
    try:
        killer = TreeKiller(ProcessId.of(leader.pid))
        killer.seen.add(stale)  # seen in the tree before it exited and its pid was reused
        await killer.kill(grace=GRACE)
        with trio.fail_after(10):
            assert await leader.wait() == -signal.SIGTERM
        assert await ended_by(child, real) == signal.SIGUSR1
    finally:
        await finish(child, leader)
