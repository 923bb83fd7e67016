"""`hermes serve` as a real subprocess: ready line, one per home, SIGTERM drains to exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import apsw

from hermes.agent.offline import tool_line
from hermes.gateway.serve import READY_LINE
from hermes.state.schema import SCHEMA_VERSION
from hermes.terminal.tree import descendant_pids
from tests.processes import HERMES, hermes, wait_ready
from tests.seed import rows, writing


def test_serve_ready_refuses_second_and_drains_on_sigterm(home, spawn):
    home.config_path.write_text(
        "gateway:\n  drain_timeout: 5\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
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


def user_version(path: Path) -> int:
    return rows(path, "PRAGMA user_version")[0][0]


def test_serve_refuses_a_database_from_a_newer_hermes(home):
    home.config_path.write_text("gateway:\n  local:\n    port: 0\nops:\n  port: 0\n")
    newer = SCHEMA_VERSION + 1
    with writing(home.state_db) as conn:
        conn.execute(f"PRAGMA user_version = {newer}")
    result = hermes("serve", timeout=30)
    assert result.returncode != 0
    assert READY_LINE not in result.stdout
    assert f"schema version {newer} is newer than this hermes knows" in result.stderr
    assert user_version(home.state_db) == newer  # refused, not guessed at or migrated


def test_secrets_never_reach_the_log(home, spawn, monkeypatch):
    secret = "sk-test-supersecret-123"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # from .env only
    home.env_path.write_text(f"OPENAI_API_KEY={secret}\n")
    home.config_path.write_text(
        "model:\n  provider: openai\n  model: gpt-test\n  base_url: http://127.0.0.1:1/v1\n"
        "  api_key_env: OPENAI_API_KEY\ngateway:\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
    serve = spawn("--verbose")  # debug logging too: the HTTP client's lines included
    wait_ready(serve)  # serve refuses to start when the key is missing: it was read
    chat = hermes("chat", "-m", "hello")
    # the user reads one line without the provider's address; the log keeps the detail
    assert "no model provider could answer" in chat.stdout + chat.stderr
    assert "127.0.0.1:1" not in chat.stdout + chat.stderr
    serve.send_signal(signal.SIGTERM)
    out, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    log = (home.logs / "hermes.log").read_text()
    assert "127.0.0.1:1" in log  # the failed request was logged, its key was not
    for text in (log, out, err, chat.stdout, chat.stderr):
        assert secret not in text


def sleeping_descendants() -> list[int]:
    """Our descendants running `sleep 30` (the test process is a subreaper: orphans stay ours)."""
    found = []
    for pid in descendant_pids(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x0030\x00":
                found.append(pid)
        except OSError:
            continue
    return found


def read_until(stream, marker: str) -> list[str]:
    """Lines of a child's output up to the first containing `marker` (pytest-timeout guards)."""
    lines = []
    for line in stream:
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} never came: {lines}")


def test_a_second_signal_during_the_drain_cancels_at_once(home, spawn):
    home.config_path.write_text(
        "gateway:\n  drain_timeout: 60\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
    serve = spawn()
    wait_ready(serve)
    message = tool_line("terminal", command="sleep 30")
    chat = subprocess.Popen(
        [*HERMES, "chat", "-m", message], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        read_until(chat.stdout, "[terminal ")  # the turn is in flight, its command starting
        serve.send_signal(signal.SIGTERM)
        started = time.monotonic()
        read_until(serve.stderr, "draining")  # the first signal was taken: the drain is on
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=15) == 0
        assert time.monotonic() - started < 30  # far from the 60 s deadline, even on a busy machine
        chat.communicate(timeout=15)  # its connection closed with serve
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    assert "cancelling what is left" in serve.stderr.read()
    assert sleeping_descendants() == []
