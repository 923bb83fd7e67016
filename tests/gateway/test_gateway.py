"""`hermes serve` as a process: a port in use, `hermes chat` and `hermes status`, and a
long chat with the offline model. The router and its session actors (busy modes, the
bounded queue, idle timeout, /stop, /new, drain notices) are tested in test_router.py."""

from __future__ import annotations

import socket
import subprocess

import apsw
import pytest

from tests.processes import HERMES, hermes, wait_ready


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("gateway:\n  local:\n    port: {port}\nops:\n  port: 0\n",
         "127.0.0.1:{port} is already in use"),
        ("gateway:\n  local:\n    port: 0\nops:\n  port: {port}\n",
         "127.0.0.1:{port} is already in use; stop what holds it or set ops.port"),
        ("gateway:\n  local:\n    port: 0\n  webhooks:\n    port: {port}\nops:\n  port: 0\n"
         "platforms:\n  whatsapp:\n    token_env: WA_TOKEN\n    app_secret_env: WA_SECRET\n"
         "    verify_token_env: WA_VERIFY\n    phone_number_id: '1'\n"
         "    base_url: http://127.0.0.1:{port}/v21.0\n",  # listens, never answers
         "127.0.0.1:{port} is already in use; stop what holds it or set gateway.webhooks.port"),
    ],
    ids=["endpoint", "operator surfaces", "webhooks"],
)  # fmt: skip
def test_a_port_in_use_exits_75_naming_it(home, taken_port, config, said):
    home.config_path.write_text(config.format(port=taken_port))
    (home.root / ".env").write_text("WA_TOKEN=t\nWA_SECRET=s\nWA_VERIFY=v\n")
    result = hermes("serve")
    assert result.returncode == 75, result.stderr
    assert said.format(port=taken_port) in result.stderr
    assert "Traceback" not in result.stderr
    assert not [p.name for p in home.port_files if p.exists()]  # no port of a serve gone


@pytest.mark.timeout(120)
def test_chat_and_status_commands(home, spawn):
    serve = spawn()
    try:
        wait_ready(serve)
        chat = hermes("chat", "-m", "hello hermes")
        assert chat.returncode == 0, chat.stderr
        assert "You said: hello hermes" in chat.stdout
        status = hermes("status")
        assert status.returncode == 0, status.stderr
        assert "gateway" in status.stdout and "running" in status.stdout
        (home.root / "serve.token").write_text("wrong\n")
        refused = hermes("chat", "-m", "hi")
        assert refused.returncode == 1 and "refused the connection" in refused.stderr
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0


@pytest.mark.timeout(120)
def test_a_long_chat_with_the_offline_model_compacts_and_keeps_answering(home, spawn):
    """A fresh home, the default offline model (a small window), one long REPL chat."""
    serve = spawn()
    wait_ready(serve)
    try:
        lines = [f"line {n}: " + "tell me more about the weather " * 25 for n in range(60)]
        lines += ["/usage", "the last one"]
        chat = subprocess.run([*HERMES, "chat"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=90)  # fmt: skip
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.count("You said: line ") == 60
        assert "You said: the last one\nyou> " in chat.stdout
        assert "compacts past 6000" in chat.stdout  # /usage, answered without the agent
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0
    conn = apsw.Connection(str(home.state_db), flags=apsw.SQLITE_OPEN_READONLY)
    kinds = [k for (k,) in conn.execute("SELECT kind FROM compactions")]
    assert kinds and set(kinds) == {"summary"}
    assert conn.execute("SELECT count(*) FROM messages WHERE role = 'user'").get == 61
    conn.close()


def test_with_serve_down_a_command_says_to_start_it(home):
    """A refused connection is named as such, with what to do: not an empty message."""
    home.serve_token.write_text("t\n")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (home.root / "serve.port").write_text(f"{port}\n")
    for command in (("chat", "-m", "hi"), ("status",)):
        done = hermes(*command)
        assert done.returncode == 1
        assert f"cannot reach ws://127.0.0.1:{port}/: " in done.stderr
        assert done.stderr.rstrip().endswith(
            "is `hermes serve` running? (start it: hermes serve)"
        ), done.stderr


@pytest.mark.timeout(90)
def test_a_platform_out_of_reach_is_one_line_a_reconnect(home, spawn):
    """No route to the platform: each failed connection is one warning with the reason
    (as `hermes status` says it), the traceback only at debug level."""
    with socket.socket() as closed:  # nothing listens: every connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    home.config_path.write_text(
        "gateway:\n  local:\n    port: 0\nops:\n  port: 0\nplatforms:\n  telegram:\n"
        f"    token_env: TG\n    base_url: 'http://127.0.0.1:{port}/'\n"
    )
    home.env_path.write_text("TG=123:abc\n")
    serve = spawn()
    wait_ready(serve)
    seen, failures = [], 0
    for line in serve.stderr:
        seen.append(line)
        failures += "adapters/telegram: telegram: " in line
        if failures == 3:  # three connections failed, the first and two reconnects
            break
    serve.terminate()
    assert serve.wait(timeout=60) == 0
    failed = [line for line in seen if "adapters/telegram" in line]
    assert all(" WARNING " in line and "onnect" in line for line in failed), failed
    assert not [line for line in seen if "Traceback" in line or "crashed" in line], seen
