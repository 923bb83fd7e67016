"""A sandboxed tree through a real `hermes serve`: a member that escaped into its own
session and one that ignores SIGTERM are gone after /stop, after a cron cancel, and
after serve is SIGKILLed and started again. Owners' commands are sandboxed here
(`terminal.sandbox.owner: sandbox`), so the local endpoint's owner drives them."""

from __future__ import annotations

import json
import secrets
import signal

import pytest
import trio

from hermes.agent.offline import tool_line
from tests.gateway.test_serve_end_to_end import Client, connect
from tests.processes import hermes, wait_ready
from tests.terminal.test_sandbox import STUBBORN, sandboxed_pids

CONFIG = (
    "gateway:\n  local:\n    port: 0\nops:\n  port: 0\n"
    "cron:\n  lease_seconds: 2\n  heartbeat_seconds: 0.5\n"
    "terminal:\n  sandbox:\n    owner: sandbox\n"
)


@pytest.fixture
def sandboxed(home, require_system):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    home.config_path.write_text(CONFIG)
    return f"hermes-test-{secrets.token_hex(4)}"


async def tree_up(marker: str) -> list:
    """The tree's three members, once all of them run (in the sandbox, on this machine)."""
    with trio.fail_after(30):
        while len(found := sandboxed_pids(marker)) < 3:  # noqa: ASYNC110 (processes appear)
            await trio.sleep(0.05)
    return found


async def gone(tree: list) -> None:
    """Every one of `tree` ended (an exiting process has no command line left to find it
    by, so they are watched by pid and start time)."""
    with trio.fail_after(30):
        while any(p.alive() for p in tree):  # noqa: ASYNC110 (processes die)
            await trio.sleep(0.05)


async def start_turn(ws, session: str, text: str) -> None:
    """Send a message without waiting for its answer."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "chat.send",
               "params": {"text": text, "session": session}}  # fmt: skip
    await ws.send_message(json.dumps(request))


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_stop_a_cron_cancel_and_a_sigkilled_serve_leave_no_sandboxed_process(
    home, spawn, sandboxed
):
    job = f"{sandboxed}-cron"
    prompt = tool_line("terminal", command=STUBBORN.format(marker=job))
    added = hermes("cron", "add", "every 1h", "--name", "stubborn", "--prompt", prompt)
    assert added.returncode == 0, added.stderr
    serve = spawn()
    port = await trio.to_thread.run_sync(wait_ready, serve)
    token = home.serve_token.read_text().strip()
    command = tool_line("terminal", command=STUBBORN.format(marker=sandboxed))
    async with connect(port, token) as ws:
        # /stop
        await start_turn(ws, "local_stop", command)
        tree = await tree_up(sandboxed)
        async with connect(port, token) as other:
            stop = await Client(other).call("chat.send", {"text": "/stop", "session": "local_stop"})
        assert stop["result"]["text"] == "Stopped the running turn."
        await gone(tree)
        assert not sandboxed_pids(sandboxed)

        # a cron cancel
        async with connect(port, token) as other:
            await Client(other).call("cron.run", {"job": "stubborn"})
        tree = await tree_up(job)
        cancelled = await trio.to_thread.run_sync(hermes, "cron", "cancel", "stubborn")
        assert cancelled.returncode == 0, cancelled.stderr
        await gone(tree)
        assert not sandboxed_pids(job)

        # serve killed outright
        again = f"{sandboxed}-2"
        again_command = tool_line("terminal", command=STUBBORN.format(marker=again))
        await start_turn(ws, "local_kill", again_command)
        tree = await tree_up(again)
    serve.send_signal(signal.SIGKILL)
    await trio.to_thread.run_sync(serve.wait)
    assert all(p.alive() for p in tree)  # orphaned: what the next serve finds

    second = spawn()
    await trio.to_thread.run_sync(wait_ready, second)  # it kills them before it starts
    assert not sandboxed_pids(again)
    second.send_signal(signal.SIGTERM)
    assert await trio.to_thread.run_sync(second.wait) == 0
