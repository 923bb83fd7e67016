"""A frozen event loop ends serve with 75 and every stack in the log, so the service
manager starts a fresh one; a loop that keeps answering is left alone."""

from __future__ import annotations

import logging
import os
import subprocess
import time

import pytest
import trio

from hermes.actors.snapshot import RunState, Snapshot
from hermes.ops.watchdog import FREEZE_HOOK, STATS_EVERY, LoopWatch
from tests.processes import HERMES, wait_ready

FREEZE_SECONDS = 2


@pytest.mark.timeout(60)
def test_a_frozen_loop_exits_75_with_stacks_in_the_log(home):
    home.config_path.write_text(
        f"gateway:\n  local:\n    port: 0\nops:\n  port: 0\n  freeze_seconds: {FREEZE_SECONDS}\n"
    )
    proc = subprocess.Popen(
        [*HERMES, "serve"], env={**os.environ, FREEZE_HOOK: "0.5"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_ready(proc)
        for line in proc.stderr:
            if "blocking the event loop" in line:
                frozen_at = time.monotonic()
                break
        _, log = proc.communicate(timeout=30)
        exited_after = time.monotonic() - frozen_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 75, log[-2000:]
    assert exited_after <= FREEZE_SECONDS + 2, exited_after
    assert "event loop frozen" in log
    assert "in _freeze" in log  # the main thread's stack: where the loop is stuck
    assert "task " in log and "_beat" in log  # and the Trio tasks, with where each waits
    assert "event loop frozen" in (home.logs / "hermes.log").read_text()


async def test_every_five_minutes_the_log_says_rss_sessions_and_outbox_depth(
    home, registry, autojump_clock, caplog
):
    tree = Snapshot("serve", "Supervisor", RunState.RUNNING,
                    children=(Snapshot("gateway", "Router", RunState.RUNNING,
                                       detail={"sessions": 3}),))  # fmt: skip
    exits, lines, logged = [], [], trio.Event()

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("rss="):
                lines.append(record.getMessage())
                logged.set()

    handler = Lines()
    caplog.set_level(logging.INFO, logger="hermes.ops.watchdog")
    logging.getLogger("hermes.ops.watchdog").addHandler(handler)
    try:
        watch = LoopWatch(60.0, lambda: tree, registry, home.state_db, exit=exits.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run)
            begin = trio.current_time()
            await trio.sleep(STATS_EVERY - 1)
            assert lines == []
            await logged.wait()  # (its state.db read is a thread: virtual time runs on)
            assert trio.current_time() - begin >= STATS_EVERY
            watch.request_drain(trio.current_time() + 1)
    finally:
        logging.getLogger("hermes.ops.watchdog").removeHandler(handler)
    assert "open_sessions=3 outbox_depth=0" in lines[0]
    assert float(lines[0].split()[0].removeprefix("rss=")) > 0
    assert exits == []  # a loop that keeps answering (in virtual time) is not frozen
