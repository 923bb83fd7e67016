"""The local endpoint under bad input, clients that leave, and a drain: a real serve."""

from __future__ import annotations

import json
import signal
import typing

import attrs
import pytest
import trio
from trio_websocket import open_websocket_url

from hermes.adapters.local.endpoint import ChatSend
from hermes.gateway.intake import DRAIN_NOTICE
from hermes.operations.catalog import every
from tests.fakes.openai import stream_answer
from tests.processes import wait_ready

VALID = {  # each method's required parameters
    "chat.send": {"text": "hi"},
    "pairing.approve": {"platform": "telegram", "code": "ABCDEFGH"},
    "pairing.deny": {"platform": "telegram", "user": "1"},
    "pairing.revoke": {"platform": "telegram", "user": "1"},
    "identities.unlink": {"platform": "telegram", "user": "1"},
    "sessions.show": {"id": "x"},
    "sessions.search": {"query": "x"},
    "sessions.export": {"id": "x"},
    "cron.add": {"schedule": "every 1h", "prompt": "p"},
    **{f"cron.{name}": {"job": "x"} for name in
       ("edit", "pause", "resume", "remove", "run", "cancel", "history")},
    "outbox.retry": {"id": 1},
    "outbox.drop": {"id": 1},
}  # fmt: skip
WRONG = {  # values of another type than the parameter's
    "str": [["a", "list"], {"an": "object"}, 12, True],
    "int": [["a", "list"], {"an": "object"}, "12", True, 1.5],
    "bool": [["a", "list"], {"an": "object"}, "yes", 1],
}


def type_name(declared: object) -> str:
    """A field's (first) type by name: attrs keeps it as the annotation's text until
    something (cattrs, structuring) resolves it into the type."""
    if isinstance(declared, str):
        return declared.split(" |")[0]
    first = (typing.get_args(declared) or (declared,))[0]
    return getattr(first, "__name__", "")


@pytest.fixture
def serve(home, fake, spawn):
    home.config_path.write_text(
        f"model: {{provider: fake, model: m, base_url: '{fake.url}'}}\n"
        "gateway:\n  drain_timeout: 2\n  local:\n    port: 0\nops:\n  port: 0\n"
    )
    proc = spawn()
    return proc, wait_ready(proc), home.serve_token.read_text().strip()


def connect(port: int, token: str):
    headers = [(b"authorization", f"Bearer {token}".encode())]
    return open_websocket_url(f"ws://127.0.0.1:{port}/", extra_headers=headers)


async def call(ws, request_id, method, params) -> dict:
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                      "params": params}))  # fmt: skip
    while True:
        msg = json.loads(await ws.get_message())
        if msg.get("id") == request_id:
            return msg


@pytest.mark.timeout(120)
async def test_wrong_params_deep_nesting_and_leaving_clients(serve, fake):
    proc, port, token = serve
    async with connect(port, token) as ws:
        n = 0
        params_of = {name: op.args for name, op in every().items()}
        for method, kind in {"chat.send": ChatSend, **params_of}.items():
            for field in attrs.fields(kind):
                for value in WRONG.get(type_name(field.type), []):
                    n += 1
                    params = {**VALID.get(method, {}), field.name: value}
                    answer = await call(ws, n, method, params)
                    assert answer["error"]["code"] == -32602, (method, field, value, answer)
                    assert f"{field.name}:" in answer["error"]["message"]
        assert n > 50
        assert (await call(ws, 0, "sessions.list", {"limit": 10**9}))["error"]["code"] == -32602
        deep = "[" * 100_000 + "]" * 100_000
        await ws.send_message(deep)
        assert json.loads(await ws.get_message())["error"]["code"] == -32700
        assert "result" in await call(ws, 0, "status", {})  # the connection is still usable

    fake.script(*[stream_answer([f"w{i} " for i in range(50)], pause=0.05)] * 100)

    async def leave_mid_turn() -> None:
        async with connect(port, token) as ws:
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chat.send",
                                              "params": {"text": "talk"}}))  # fmt: skip
            await ws.get_message()  # the first streamed event: the turn is under way

    async with trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(leave_mid_turn)
    proc.send_signal(signal.SIGTERM)
    assert await trio.to_thread.run_sync(proc.wait, 60) == 0
    log = proc.stderr.read()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


@pytest.mark.timeout(60)
async def test_a_drained_turn_says_it_was_interrupted_and_new_messages_get_the_notice(serve, fake):
    proc, port, token = serve
    fake.script(stream_answer([f"w{i} " for i in range(400)], pause=0.05))  # 20 s of words
    async with connect(port, token) as ws:
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chat.send",
                                          "params": {"text": "talk slowly"}}))  # fmt: skip
        await ws.get_message()  # streaming
        proc.send_signal(signal.SIGTERM)  # drain: 2 s, then the turn is cancelled
        await trio.to_thread.run_sync(_until_draining, proc)
        late = await call(ws, 2, "chat.send", {"text": "are you there?"})
        assert late["error"]["message"] == DRAIN_NOTICE
        while True:
            msg = json.loads(await ws.get_message())
            if msg.get("id") == 1:
                break
        assert msg["result"]["status"] == "interrupted"
        assert "shutting down" in msg["result"]["text"]
    assert await trio.to_thread.run_sync(proc.wait, 60) == 0


def _until_draining(proc) -> None:
    for line in proc.stderr:
        if "draining" in line:
            return
