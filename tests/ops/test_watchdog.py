"""A frozen event loop ends serve with 75 and every stack in the log, so the service
manager starts a fresh one; a loop that keeps answering is left alone."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from hermes.ops.watchdog import FREEZE_HOOK
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
