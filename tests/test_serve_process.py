"""`hermes serve` as a real subprocess: ready line, one per home, SIGTERM drains to exit 0."""

from __future__ import annotations

import os
import signal
import time

import apsw

from hermes.gateway.serve import READY_LINE
from hermes.state.schema import SCHEMA_VERSION
from tests.processes import hermes, wait_ready


def test_serve_ready_refuses_second_and_drains_on_sigterm(home, spawn):
    home.config_path.write_text("gateway:\n  drain_timeout: 5\n  local:\n    port: 0\n")
    serve = spawn()
    wait_ready(serve)
    assert home.serve_pid.read_text().strip() == str(serve.pid)

    second = hermes("serve")
    assert second.returncode == 75
    assert f"already running for this home (pid {serve.pid}" in second.stderr
    assert READY_LINE not in second.stdout
    assert oct(home.serve_token.stat().st_mode & 0o777) == "0o600"

    sent = time.monotonic()
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=10) == 0
    assert time.monotonic() - sent < 5
    assert "draining" in serve.stderr.read()
    assert home.serve_pid.read_text() == ""


def test_a_killed_serve_leaves_no_stale_claim(home, spawn):
    serve = spawn()
    wait_ready(serve)
    os.kill(serve.pid, signal.SIGKILL)
    serve.wait()
    again = spawn()
    wait_ready(again)
    again.send_signal(signal.SIGINT)
    assert again.wait(timeout=10) == 0


def test_serve_hosts_state_db_and_flushes_it_on_drain(home, spawn):
    serve = spawn()
    wait_ready(serve)
    assert home.state_db.exists()  # opened (and migrated) before the ready line
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=30) == 0
    conn = apsw.Connection(str(home.state_db))
    try:
        assert conn.execute("PRAGMA integrity_check").get == "ok"
        assert conn.execute("PRAGMA user_version").get == SCHEMA_VERSION
    finally:
        conn.close()
    assert not os.path.exists(f"{home.state_db}-wal")  # checkpointed and closed last
