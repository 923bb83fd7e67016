"""`hermes serve` end to end: a real subprocess, the local endpoint over WebSocket,
the offline model and a fake OpenAI-compatible server, a cron job made by the
agent delivered to the client, and SIGTERM in the middle of a turn."""

from __future__ import annotations

import json
import signal
import time

import apsw
import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError, open_websocket_url

from tests.fakes.openai import (
    error_answer,
    stream_answer,
    text_answer,
    tool_answer,
)
from tests.processes import wait_ready

DRAIN = 3.0


@pytest.fixture
def serve(home, fake, spawn):
    home.config_path.write_text(
        f"model: {{provider: fake, model: fake-1, base_url: '{fake.url}', api_key_env: FAKE_KEY}}\n"
        "fallback_providers:\n  - {provider: offline, model: hermes-offline}\n"
        f"gateway:\n  drain_timeout: {DRAIN}\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
    home.env_path.write_text("FAKE_KEY=sk-fake\n")
    return spawn()


class Client:
    def __init__(self, ws):
        self.ws = ws
        self.ids = 0
        self.notes: list[dict] = []

    async def send_raw(self, text: str) -> dict:
        await self.ws.send_message(text)
        return json.loads(await self.ws.get_message())

    async def call(self, method: str, params: dict, until=None) -> dict:
        """Send a request; collect notifications until its response (or `until` says stop)."""
        self.ids += 1
        await self.ws.send_message(
            json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        )
        return await self.response(self.ids, until)

    async def response(self, request_id: int, until=None) -> dict:
        while True:
            msg = json.loads(await self.ws.get_message())
            if msg.get("id") == request_id:
                return msg
            self.notes.append(msg)
            if until is not None and until(msg):
                return msg


def connect(port: int, token: str):
    headers = [(b"authorization", f"Bearer {token}".encode())]
    return open_websocket_url(f"ws://127.0.0.1:{port}/", extra_headers=headers,
                              max_message_size=16 * 1024 * 1024)  # fmt: skip


@pytest.mark.timeout(120)
async def test_serve_end_to_end(home, fake, serve):
    port = await trio.to_thread.run_sync(wait_ready, serve)
    token = home.serve_token.read_text().strip()

    with pytest.raises(HandshakeError):  # a wrong token is refused
        async with connect(port, "not-the-token"):
            pass

    async with connect(port, token) as ws:
        client = Client(ws)
        # malformed frames get errors and the connection lives on
        bad = await client.send_raw("{not json")
        assert bad["error"]["code"] == -32700
        unknown = await client.call("no.such.method", {})
        assert unknown["error"]["code"] == -32601

        # the fake provider answers
        fake.script(text_answer("Hello from the fake provider"))
        first = await client.call("chat.send", {"text": "hi"})
        session = first["result"]["session"]
        assert first["result"]["text"] == "Hello from the fake provider"
        assert fake.requests[-1]["auth"] == "Bearer sk-fake"

        # the fake refuses our key: the offline model answers instead
        fake.script(error_answer(401, "bad key"))
        second = await client.call("chat.send", {"text": "are you there", "session": session})
        assert second["result"]["text"] == "You said: are you there"

        # the agent makes a cron job with its cronjob tool; its brief comes back here
        fake.script(
            tool_answer(("cronjob", {"action": "create", "schedule": "in 2s",
                                     "prompt": "Say the brief", "name": "brief"})),
            text_answer("Scheduled."),
            text_answer("THE BRIEF"),  # the cron fire's own turn
        )  # fmt: skip
        made = await client.call("chat.send", {"text": "remind me", "session": session})
        assert made["result"]["text"] == "Scheduled."
        with trio.fail_after(30):
            brief = await client.response(
                -1, until=lambda m: m.get("params", {}).get("kind") == "cron"
            )
        assert (brief["method"], brief["params"]["text"]) == ("chat.message", "THE BRIEF")
        assert brief["params"]["session"] == session

        status = await client.call("status", {})
        names = [c["name"] for c in status["result"]["children"]]
        assert names == [
            "state", "terminal", "mcp", "browsers", "adapters", "outbox", "scheduler", "gateway",
            "watchdog",
            "ops",
            "retention",
            "collector",
        ]  # fmt: skip
        local = status["result"]["children"][4]["children"][0]
        assert (local["name"], local["detail"]["adapter"]) == ("local", "live")

        # a 10 MB frame is refused
        with pytest.raises(ConnectionClosed) as closed:
            await client.call("chat.send", {"text": "x" * (10 * 1024 * 1024)})
        assert closed.value.reason.code == 1009

    async with connect(port, token) as ws:
        client = Client(ws)
        # SIGTERM in the middle of a streamed turn
        fake.script(stream_answer([f"word{i} " for i in range(200)], pause=0.2))
        request = {"jsonrpc": "2.0", "id": 1, "method": "chat.send",
                   "params": {"text": "talk slowly", "session": session}}  # fmt: skip
        await ws.send_message(json.dumps(request))
        await client.response(1, until=lambda m: m.get("params", {}).get("kind") == "text")
        sent = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        code = await trio.to_thread.run_sync(serve.wait, 30)
    assert code == 0, serve.stderr.read()
    assert time.monotonic() - sent < DRAIN + 3

    conn = apsw.Connection(str(home.state_db))
    try:
        assert conn.execute("PRAGMA integrity_check").get == "ok"
        last = conn.execute(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1",
            (session,),
        ).fetchone()
    finally:
        conn.close()
    assert last[0] == "system" and last[1].startswith("[interrupted")
