"""Self-tests of the fake Discord (tests/fakes/discord.py), driven from trio with httpx
and trio-websocket, as the adapter will drive it. The fake's blocking waits run in a
worker thread; nothing sleeps, except to see that no frame comes (an ACK that must not
come) for about twice a short heartbeat interval."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.fakes.discord import BOT_ID, TOKEN, FakeDiscord

INTENTS = (1 << 9) | (1 << 12) | (1 << 15)  # guild messages, direct messages, content


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord(heartbeat_interval=0.5) as fake:
        yield fake
        assert fake.internal_errors == []


async def off(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A blocking call of the fake (a wait) in a worker thread."""
    return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def rest(
    discord: FakeDiscord, verb: str, path: str, token: str = TOKEN, **body: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bot {token}"}
    async with httpx.AsyncClient(timeout=10) as client:
        kwargs: dict[str, Any] = {"json": body} if verb in ("POST", "PATCH") else {}
        return await client.request(verb, f"{discord.api_url}/{path}", headers=headers, **kwargs)


async def gateway_url(discord: FakeDiscord) -> str:
    answer = await rest(discord, "GET", "gateway/bot")
    assert answer.status_code == 200, answer.text
    return answer.json()["url"] + "?v=10&encoding=json"


async def receive(ws: WebSocketConnection, timeout: float = 5) -> dict[str, Any]:
    with trio.fail_after(timeout):
        return json.loads(await ws.get_message())


async def send(ws: WebSocketConnection, op: int, d: Any) -> None:
    await ws.send_message(json.dumps({"op": op, "d": d}))


async def identify(ws: WebSocketConnection, token: str = TOKEN) -> None:
    properties = {"os": "linux", "browser": "hermes", "device": "hermes"}
    await send(ws, 2, {"token": token, "intents": INTENTS, "properties": properties})


async def hello_and_ready(ws: WebSocketConnection) -> dict[str, Any]:
    hello = await receive(ws)
    assert hello["op"] == 10
    await identify(ws)
    ready = await receive(ws)
    assert ready["op"] == 0 and ready["t"] == "READY"
    return ready


async def nothing_within(ws: WebSocketConnection, seconds: float) -> None:
    with trio.move_on_after(seconds):
        frame = await ws.get_message()
        pytest.fail(f"an unexpected frame: {frame}")


@pytest.mark.timeout(30)
async def test_gateway_bot_and_auth(discord: FakeDiscord):
    answer = await rest(discord, "GET", "gateway/bot")
    body = answer.json()
    assert body["url"] == discord.gateway_url and body["url"].startswith("ws://127.0.0.1:")
    assert body["shards"] == 1 and body["session_start_limit"]["max_concurrency"] == 1
    assert answer.headers["X-RateLimit-Bucket"] == "gateway-bot"
    wrong = await rest(discord, "GET", "gateway/bot", token="nope")
    assert wrong.status_code == 401
    assert wrong.json() == {"message": "401: Unauthorized", "code": 0}
    me = await rest(discord, "GET", "users/@me")
    assert me.json()["id"] == BOT_ID and me.json()["bot"] is True
    assert [r["status"] for r in discord.refused] == [401]


@pytest.mark.timeout(30)
async def test_hello_heartbeat_ack_identify_ready(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        hello = await receive(ws)
        assert hello == {"op": 10, "d": {"heartbeat_interval": 500}, "s": None, "t": None}
        await send(ws, 1, None)
        assert (await receive(ws))["op"] == 11
        await identify(ws)
        ready = await receive(ws)
        assert ready["op"] == 0 and ready["t"] == "READY" and ready["s"] == 1
        d = ready["d"]
        assert d["user"]["id"] == BOT_ID and d["user"]["username"] == "hermes"
        assert d["user"]["bot"] is True and d["guilds"] == []
        assert d["resume_gateway_url"] == discord.resume_gateway_url
        await send(ws, 1, 1)
        assert (await receive(ws))["op"] == 11
    await off(discord.wait_open_sockets, 0)
    assert discord.identifies == 1 and discord.connections == 1
    assert discord.identify_payloads[0]["intents"] == INTENTS
    assert [h["d"] for h in discord.heartbeats] == [None, 1]
    assert discord.closes == [1000]
    [session] = discord.sessions
    assert session["session_id"] == d["session_id"] and session["seq"] == 1


@pytest.mark.timeout(30)
async def test_injected_messages_come_as_message_create(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        await hello_and_ready(ws)
        dm_id = discord.message("hello")
        frame = await receive(ws)
        assert frame["op"] == 0 and frame["t"] == "MESSAGE_CREATE" and frame["s"] == 2
        d = frame["d"]
        assert d["id"] == dm_id and d["content"] == "hello" and d["channel_id"] == "2001"
        assert "guild_id" not in d and d["author"]["id"] == "1001"
        assert d["author"].get("bot", False) is False and d["mentions"] == []
        guild_id = discord.message("hi", guild_id="500", mentions_bot=True)
        frame = await receive(ws)
        assert frame["s"] == 3 and frame["d"]["id"] == guild_id
        assert frame["d"]["guild_id"] == "500" and frame["d"]["channel_id"] == "3001"
        assert frame["d"]["content"] == f"<@{BOT_ID}> hi"
        assert [u["id"] for u in frame["d"]["mentions"]] == [BOT_ID]
        assert int(guild_id) > int(dm_id)
        # a reply to the bot's own message
        sent = await rest(discord, "POST", "channels/3001/messages", content="answer")
        bot_message = sent.json()["id"]
        discord.message("and?", guild_id="500", reply_to_bot_message=bot_message)
        d = (await receive(ws))["d"]
        assert d["message_reference"]["message_id"] == bot_message
        assert d["referenced_message"]["author"]["id"] == BOT_ID
        assert d["type"] == 19 and [u["id"] for u in d["mentions"]] == [BOT_ID]
        discord.message("beep", author_bot=True)
        assert (await receive(ws))["d"]["author"]["bot"] is True
    assert [r["s"] for r in discord.dispatches] == [1, 2, 3, 4, 5]


@pytest.mark.timeout(30)
async def test_resume_replays_what_was_missed_then_resumed(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        ready = await hello_and_ready(ws)
        discord.message("before")
        assert (await receive(ws))["s"] == 2
        await ws.aclose(4000)  # not 1000: that would end the session
    await off(discord.wait_open_sockets, 0)
    gap = [discord.message("during the gap 1"), discord.message("during the gap 2")]
    session_id = ready["d"]["session_id"]
    async with open_websocket_url(ready["d"]["resume_gateway_url"], disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 2})
        replayed = [await receive(ws), await receive(ws)]
        assert [f["d"]["id"] for f in replayed] == gap
        assert [f["s"] for f in replayed] == [3, 4]
        resumed = await receive(ws)
        assert resumed["op"] == 0 and resumed["t"] == "RESUMED" and resumed["s"] == 5
        after = discord.message("after")
        frame = await receive(ws)
        assert frame["d"]["id"] == after and frame["s"] == 6
    assert discord.resumes == 1 and discord.identifies == 1
    assert [s["path"] for s in discord.sockets] == ["/gateway", "/resume"]
    assert [(r["s"], r["replay"]) for r in discord.dispatches][2:] == [
        (3, True), (4, True), (5, False), (6, False),
    ]  # fmt: skip


@pytest.mark.timeout(30)
async def test_unknown_session_and_new_sessions(discord: FakeDiscord):
    lost = discord.message("nobody there")  # no session yet: lost
    assert [x["d"]["id"] for x in discord.lost] == [lost]
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": "nope", "seq": 3})
        assert await receive(ws) == {"op": 9, "d": False, "s": None, "t": None}
        await identify(ws)  # on the same socket
        first = await receive(ws)
        assert first["t"] == "READY"
    discord.message("missed by the first session")
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        second = await hello_and_ready(ws)  # a new session: nothing replayed
        assert second["d"]["session_id"] != first["d"]["session_id"]
        await nothing_within(ws, 0.3)
    assert discord.resumes == 0 and discord.identifies == 2


@pytest.mark.timeout(30)
async def test_zombie_stops_acks_and_holds_dispatches(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        ready = await hello_and_ready(ws)
        assert discord.zombie() == 1
        await send(ws, 1, 1)
        missed = discord.message("into the void")
        await nothing_within(ws, 1.0)  # no ACK, no dispatch
        await ws.aclose(4000)
    assert discord.closes == [4000]
    assert [h["acked"] for h in discord.heartbeats] == [False]
    async with open_websocket_url(ready["d"]["resume_gateway_url"], disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        session_id = ready["d"]["session_id"]
        await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 1})
        assert (await receive(ws))["d"]["id"] == missed
        assert (await receive(ws))["t"] == "RESUMED"
        await send(ws, 1, 3)
        assert (await receive(ws))["op"] == 11  # a new socket is no zombie


@pytest.mark.timeout(30)
@pytest.mark.parametrize("code", [1000, 1001, 4000])
async def test_a_client_close_with_1000_or_1001_ends_the_session(discord: FakeDiscord, code):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        ready = await hello_and_ready(ws)
        await ws.aclose(code)
    await off(discord.wait_open_sockets, 0)
    gap = discord.message("sent while nobody was connected")
    session_id = ready["d"]["session_id"]
    async with open_websocket_url(discord.resume_gateway_url, disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 1})
        if code in (1000, 1001):  # the session ended with the close: the gap is lost
            assert await receive(ws) == {"op": 9, "d": False, "s": None, "t": None}
            assert [x["d"]["id"] for x in discord.lost] == [gap]
            assert discord.sessions[0]["valid"] is False and discord.resumes == 0
        else:
            assert (await receive(ws))["d"]["id"] == gap
            assert (await receive(ws))["t"] == "RESUMED"
            assert discord.lost == [] and discord.resumes == 1
        await ws.aclose(4000)
    assert discord.closes == [code, 4000]


@pytest.mark.timeout(30)
async def test_closing_a_socket_the_session_left_keeps_the_session(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as old:
        ready = await hello_and_ready(old)
        discord.reconnect()
        assert (await receive(old))["op"] == 7
        session_id = ready["d"]["session_id"]
        async with open_websocket_url(discord.resume_gateway_url, disconnect_timeout=5) as ws:
            assert (await receive(ws))["op"] == 10
            await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 1})
            assert (await receive(ws))["t"] == "RESUMED"
            await old.aclose(1000)  # the session is on the new socket now
            after = discord.message("still here")
            assert (await receive(ws))["d"]["id"] == after
            await ws.aclose(4000)
    assert discord.sessions[0]["valid"] is True and discord.lost == []


@pytest.mark.timeout(30)
async def test_a_flapping_gateway_closes_on_identify_and_counts_it(discord: FakeDiscord):
    discord.flap(4000)
    for _ in range(2):
        async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
            assert (await receive(ws))["op"] == 10
            await send(ws, 1, None)
            assert (await receive(ws))["op"] == 11  # alive until it is asked for a session
            await identify(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
            assert closed.value.reason.code == 4000
    async with open_websocket_url(discord.resume_gateway_url, disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": "s", "seq": 3})
        with pytest.raises(ConnectionClosed):
            await receive(ws)
    assert discord.identifies == 2 and discord.sessions == [] and discord.resumes == 0
    payloads = discord.identify_payloads
    assert [p["flapped"] for p in payloads] == [True, True]
    assert payloads[0]["at"] < payloads[1]["at"] and payloads[0]["socket"] == 1
    [attempt] = discord.resume_attempts
    assert (attempt["session_id"], attempt["accepted"], attempt["flapped"]) == ("s", False, True)
    discord.unflap()
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        await hello_and_ready(ws)
    assert discord.identifies == 3 and len(discord.sessions) == 1


@pytest.mark.timeout(30)
async def test_a_gateway_flapping_at_hello_closes_before_any_identify(discord: FakeDiscord):
    discord.flap(4000, at="hello")
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)  # without sending anything: the close came on its own
        assert closed.value.reason.code == 4000
    await off(discord.wait_open_sockets, 0)
    [sock] = discord.sockets
    assert sock["fake_close_code"] == 4000 and sock["session_id"] is None
    assert discord.identifies == 0 and discord.sessions == []
    with pytest.raises(ValueError, match="flap at"):
        discord.flap(4000, at="later")


@pytest.mark.timeout(30)
async def test_wait_settled_counts_heartbeats_after_the_session_began(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 1, None)  # before Identify: it does not count
        assert (await receive(ws))["op"] == 11
        await identify(ws)
        assert (await receive(ws))["t"] == "READY"
        await send(ws, 1, 1)
        assert (await receive(ws))["op"] == 11
        with pytest.raises(TimeoutError, match="settled"):
            await off(discord.wait_settled, 0.2)
        await send(ws, 1, 1)
        assert (await receive(ws))["op"] == 11
        assert await off(discord.wait_settled, 5.0) == 1
        await ws.aclose(4000)


@pytest.mark.timeout(30)
async def test_bad_token_closes_with_4004(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await identify(ws, token="wrong")
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
        assert closed.value.reason.code == 4004
    assert discord.sessions == [] and discord.sockets[0]["fake_close_code"] == 4004


@pytest.mark.timeout(30)
async def test_close_codes_reconnect_invalid_session_and_drop(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        ready = await hello_and_ready(ws)
        discord.reconnect()
        assert (await receive(ws))["op"] == 7
        held = discord.message("held for the resume")  # op 7 sent: it waits
        await nothing_within(ws, 0.2)
        await ws.aclose(4000)
    session_id = ready["d"]["session_id"]
    async with open_websocket_url(discord.resume_gateway_url, disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 1})
        assert (await receive(ws))["d"]["id"] == held
        assert (await receive(ws))["t"] == "RESUMED"
        discord.close(4000)
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
        assert closed.value.reason.code == 4000
    async with open_websocket_url(discord.resume_gateway_url, disconnect_timeout=5) as ws:
        assert (await receive(ws))["op"] == 10
        await send(ws, 6, {"token": TOKEN, "session_id": session_id, "seq": 3})
        assert (await receive(ws))["t"] == "RESUMED"
        discord.invalid_session(resumable=False)
        assert await receive(ws) == {"op": 9, "d": False, "s": None, "t": None}
    assert discord.sessions[0]["valid"] is False
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        await hello_and_ready(ws)
        discord.drop()
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
        assert closed.value.reason.code == 1006  # no close frame
    await off(discord.wait_open_sockets, 0)
    assert discord.resumes == 2 and discord.identifies == 2 and discord.connections == 4


@pytest.mark.timeout(30)
async def test_sends_typing_and_the_2000_limit(discord: FakeDiscord):
    ok = await rest(discord, "POST", "channels/2001/messages", content="hi")
    assert ok.status_code == 200
    message = ok.json()
    assert message["channel_id"] == "2001" and message["content"] == "hi"
    assert message["author"]["id"] == BOT_ID
    assert ok.headers["X-RateLimit-Bucket"] == "msg-2001"
    assert ok.headers["X-RateLimit-Remaining"] == "4"
    assert float(ok.headers["X-RateLimit-Reset-After"]) > 0
    reply = await rest(
        discord, "POST", "channels/2001/messages", content="x" * 2000,
        message_reference={"message_id": message["id"]},
    )  # fmt: skip
    assert reply.status_code == 200 and int(reply.json()["id"]) > int(message["id"])
    assert reply.json()["message_reference"]["message_id"] == message["id"]
    assert reply.headers["X-RateLimit-Remaining"] == "3"
    long = await rest(discord, "POST", "channels/2001/messages", content="x" * 2001)
    assert long.status_code == 400 and long.json()["code"] == 50035
    assert long.json()["message"] == "Invalid Form Body"
    empty = await rest(discord, "POST", "channels/2001/messages", content="")
    assert empty.status_code == 400 and empty.json()["code"] == 50035
    typing = await rest(discord, "POST", "channels/2001/typing")
    assert typing.status_code == 204 and typing.content == b""
    assert typing.headers["X-RateLimit-Bucket"] == "typing-2001"
    sent = await off(discord.wait_sent, 2)
    assert [s["id"] for s in sent] == [message["id"], reply.json()["id"]]
    assert sent[1]["message_reference"] == {"message_id": message["id"]} and "at" in sent[0]
    assert discord.sent_to("2001") == sent and discord.sent_to("9") == []
    assert [t["channel_id"] for t in discord.typing] == ["2001"]
    assert [r["code"] for r in discord.refused] == [50035, 50035]


@pytest.mark.timeout(30)
async def test_rate_limits_and_faults(discord: FakeDiscord):
    discord.rate_limit("2001", retry_after=1.5)
    limited = await rest(discord, "POST", "channels/2001/messages", content="a")
    assert limited.status_code == 429
    body = limited.json()
    assert body["retry_after"] == 1.5 and body["global"] is False
    assert body["message"] == "You are being rate limited."
    assert limited.headers["Retry-After"] == "2"
    assert limited.headers["X-RateLimit-Bucket"] == "msg-2001"
    assert limited.headers["X-RateLimit-Remaining"] == "0"
    assert float(limited.headers["X-RateLimit-Reset-After"]) == 1.5
    assert "X-RateLimit-Global" not in limited.headers
    other = await rest(discord, "POST", "channels/2002/messages", content="b")
    assert other.status_code == 200  # another channel: not limited
    discord.rate_limit(retry_after=0.25, global_=True)
    globally = await rest(discord, "POST", "channels/2002/messages", content="c")
    assert globally.status_code == 429 and globally.json()["global"] is True
    assert globally.headers["X-RateLimit-Global"] == "true"
    discord.fail(403, 50013, "Missing Permissions", channel="2003")
    discord.fail(404, 10003, "Unknown Channel", times=2)
    denied = await rest(discord, "POST", "channels/2003/messages", content="d")
    assert denied.status_code == 403
    assert denied.json() == {"message": "Missing Permissions", "code": 50013}
    for _ in range(2):
        assert (
            await rest(discord, "POST", "channels/2001/messages", content="e")
        ).status_code == 404
    assert (await rest(discord, "POST", "channels/2001/messages", content="f")).status_code == 200
    assert [(r["status"], r["code"], r["global"]) for r in discord.refused] == [
        (429, 0, False), (429, None, True), (403, 50013, None), (404, 10003, None),
        (404, 10003, None),
    ]  # fmt: skip
    assert discord.refused[0]["retry_after"] == 1.5
    assert [s["content"] for s in discord.sent] == ["b", "f"]


@pytest.mark.timeout(30)
async def test_waits_name_what_they_waited_for(discord: FakeDiscord):
    with pytest.raises(TimeoutError, match="1 accepted Resume"):
        await off(discord.wait_resumes, 1, 0.1)
    with pytest.raises(TimeoutError, match="the thing"):
        await off(discord.wait_until, lambda f: f.identifies > 0, 0.1, "the thing")


@pytest.mark.timeout(30)
async def test_its_own_process_driven_over_http():
    command = [sys.executable, "-m", "tests.fakes.discord", "--heartbeat-interval", "0.5"]
    proc = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = b""
        with trio.fail_after(10):
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(1)
                assert chunk, "the fake exited before printing its URL"
                line += chunk
        url = line.decode().strip()
        assert url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(timeout=10, base_url=url) as client:
            headers = {"Authorization": f"Bot {TOKEN}"}
            gateway = (await client.get("/api/v10/gateway/bot", headers=headers)).json()["url"]
            async with open_websocket_url(gateway, disconnect_timeout=5) as ws:
                await hello_and_ready(ws)
                answer = await client.post("/_fake/message", json={"content": "remote"})
                assert answer.json()["ok"] is True
                frame = await receive(ws)
                assert frame["d"]["id"] == answer.json()["result"]
            state = (await client.get("/_fake/state")).json()["result"]
            assert state["identifies"] == 1 and state["connections"] == 1
            bad = await client.post("/_fake/close", json={"nope": 1})
            assert bad.status_code == 400
            flap = await client.post("/_fake/flap", json={"code": 4000, "at": "hello"})
            assert flap.json() == {"ok": True, "result": None}
            assert (await client.post("/_fake/unflap", json={})).json()["ok"] is True
    finally:
        proc.terminate()
        with trio.fail_after(10):
            await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()


class Clock:
    """A clock the test moves on: the fake's 3 seconds for an interaction's callback."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def callback(
    discord: FakeDiscord, interaction: dict[str, Any], body: dict[str, Any], **headers: str
) -> httpx.Response:
    """An interaction's callback, as Discord takes it: no bot token needed."""
    url = f"{discord.api_url}/interactions/{interaction['id']}/{interaction['token']}/callback"
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url, json=body, headers=headers)


BUTTONS = [{"type": 1, "components": [
    {"type": 2, "style": 1, "label": "Approve", "custom_id": "/approve 3f9a1c"},
    {"type": 2, "style": 4, "label": "Deny", "custom_id": "/deny 3f9a1c"},
]}]  # fmt: skip


@pytest.mark.timeout(30)
async def test_components_are_kept_with_the_message_and_checked(discord: FakeDiscord):
    ok = await rest(discord, "POST", "channels/2001/messages", content="run sudo?",
                    components=BUTTONS)  # fmt: skip
    assert ok.status_code == 200 and ok.json()["components"] == BUTTONS
    [sent] = discord.sent
    assert sent["components"] == BUTTONS and sent["id"] == ok.json()["id"]
    row = BUTTONS[0]["components"]
    refused = {
        "a custom_id over 100": [{**row[0], "custom_id": "x" * 101}],
        "a label over 80": [{**row[0], "label": "x" * 81}],
        "the same custom_id twice": [row[0], {**row[1], "custom_id": row[0]["custom_id"]}],
        "six in a row": [{**row[0], "custom_id": str(i)} for i in range(6)],
        "no style": [{k: v for k, v in row[0].items() if k != "style"}],
        "an empty row": [],
    }
    for why, buttons in refused.items():
        answer = await rest(discord, "POST", "channels/2001/messages", content="x",
                            components=[{"type": 1, "components": buttons}])  # fmt: skip
        assert (answer.status_code, answer.json()["code"]) == (400, 50035), why
        assert "components" in answer.json()["errors"], why
    wrong = await rest(discord, "POST", "channels/2001/messages", content="x",
                       components=[{**BUTTONS[0], "components": [row[0]]}] * 6)  # fmt: skip
    assert wrong.status_code == 400  # six rows
    only_buttons = await rest(discord, "POST", "channels/2001/messages", content="",
                              components=BUTTONS)  # fmt: skip
    assert only_buttons.status_code == 200  # components make a message without content
    assert len(discord.sent) == 2 and len(discord.refused) == len(refused) + 1


@pytest.mark.timeout(30)
async def test_a_press_is_an_interaction_create_acknowledged_once_within_3_s():
    clock = Clock()
    with FakeDiscord(heartbeat_interval=0.5, clock=clock) as discord:
        async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
            await hello_and_ready(ws)
            discord.message("hi", guild_id="500", mentions_bot=True)  # 3001 is in guild 500
            await receive(ws)
            sent = await rest(discord, "POST", "channels/3001/messages", content="approve?",
                              components=BUTTONS)  # fmt: skip
            message = discord.sent[0]
            pressed = discord.press(message, "Deny", user_id="42", user_name="ann")
            frame = await receive(ws)
            assert (frame["op"], frame["t"], frame["s"]) == (0, "INTERACTION_CREATE", 3)
            d = frame["d"]
            assert (d["id"], d["type"], d["version"]) == (pressed, 3, 1)
            assert d["application_id"] == BOT_ID and d["token"]
            assert d["data"] == {"custom_id": "/deny 3f9a1c", "component_type": 2}
            assert (d["guild_id"], d["channel_id"]) == ("500", "3001")
            assert d["channel"] == {"id": "3001", "type": 0, "guild_id": "500"}
            assert d["member"]["user"]["id"] == "42" and "user" not in d
            assert d["member"]["user"]["username"] == "ann"
            assert d["message"] == sent.json()
            # a DM press: the user at the top, no guild
            dm = await rest(discord, "POST", "channels/2001/messages", content="approve?",
                            components=BUTTONS)  # fmt: skip
            discord.press(dm.json()["id"], "/approve 3f9a1c")
            d_dm = (await receive(ws))["d"]
            assert d_dm["user"]["id"] == "1001" and "member" not in d_dm
            assert "guild_id" not in d_dm and d_dm["channel"]["type"] == 1
            again = discord.redeliver(pressed)
            replayed = await receive(ws)
            assert replayed["s"] == again == 5 and replayed["d"] == d
        first = discord.interactions[0]
        assert (first["id"], first["custom_id"]) == (pressed, "/deny 3f9a1c")
        assert (first["user_id"], first["message_id"]) == ("42", message["id"])
        assert first["s"] == [3, 5] and first["acknowledged"] is None
        clock.now += 2.9
        ack = await callback(discord, d, {"type": 6})
        assert ack.status_code == 204 and ack.content == b""
        twice = await callback(discord, d, {"type": 6})
        assert twice.status_code == 400
        assert twice.json() == {"message": "Interaction has already been acknowledged.",
                                "code": 40060}  # fmt: skip
        unknown = await callback(discord, {"id": pressed, "token": "nope"}, {"type": 6})
        assert unknown.json() == {"message": "Unknown interaction", "code": 10062}
        assert unknown.status_code == 404
        bad = await callback(discord, d_dm, {"type": 1})  # a PONG cannot answer a press
        assert (bad.status_code, bad.json()["code"]) == (400, 50035)
        clock.now += 0.2  # past 3 s for the DM press too
        late = await callback(discord, d_dm, {"type": 6}, Authorization=f"Bot {TOKEN}")
        assert (late.status_code, late.json()["code"]) == (404, 10062)
        records = discord.callbacks
        assert [(c["type"], c["status"], c["code"]) for c in records] == [
            (6, 204, None), (6, 400, 40060), (6, 404, 10062), (1, 400, 50035), (6, 404, 10062),
        ]  # fmt: skip
        assert [c["in_time"] for c in records] == [True, True, None, True, False]
        assert [c["authorization"] for c in records] == [False] * 4 + [True]
        assert records[0]["after"] == pytest.approx(2.9)
        assert discord.interactions[0]["acknowledged"] == 6
        assert discord.interactions[1]["acknowledged"] is None
        assert await off(discord.wait_callbacks, 5) == records
        with pytest.raises(LookupError, match="no button"):
            discord.press(message, "Maybe")
        with pytest.raises(LookupError, match="no message"):
            discord.press("123", "Deny")
        assert discord.internal_errors == []


@pytest.mark.timeout(30)
async def test_press_and_its_records_over_http(discord: FakeDiscord):
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        await hello_and_ready(ws)
        sent = await rest(discord, "POST", "channels/2001/messages", content="approve?",
                          components=BUTTONS)  # fmt: skip
        async with httpx.AsyncClient(timeout=10, base_url=discord.url) as control:
            answer = await control.post(
                "/_fake/press", json={"message": sent.json()["id"], "button": "Approve",
                                      "user_id": "7"})  # fmt: skip
            assert answer.json()["ok"] is True
            d = (await receive(ws))["d"]
            assert d["id"] == answer.json()["result"] and d["user"]["id"] == "7"
            assert (await callback(discord, d, {"type": 6})).status_code == 204
            state = (await control.get("/_fake/state")).json()["result"]
            assert [i["id"] for i in state["interactions"]] == [d["id"]]
            assert [c["status"] for c in state["callbacks"]] == [204]
            missing = await control.post("/_fake/press", json={"message": "1", "button": "x"})
            assert missing.status_code == 400


@pytest.mark.timeout(30)
async def test_an_edit_replaces_what_the_message_shows(discord: FakeDiscord):
    first = (await rest(discord, "POST", "channels/2001/messages", content="Thinking",
                        components=BUTTONS)).json()  # fmt: skip
    second = (await rest(discord, "POST", "channels/2001/messages", content="two")).json()
    path = f"channels/2001/messages/{first['id']}"
    grown = await rest(discord, "PATCH", path, content="Thinking about it")
    assert grown.status_code == 200 and grown.headers["X-RateLimit-Bucket"] == "edit-2001"
    edited = grown.json()
    assert (edited["id"], edited["content"]) == (first["id"], "Thinking about it")
    assert edited["components"] == BUTTONS  # left out: kept
    assert edited["edited_timestamp"] is not None and first["edited_timestamp"] is None
    bare = await rest(discord, "PATCH", path, content="The answer", components=[])
    assert bare.status_code == 200 and bare.json()["components"] == []  # []: taken away
    same = await rest(discord, "PATCH", path, content="The answer", components=[])
    assert same.status_code == 200  # the same again: no "not modified" on Discord
    buttons_only = await rest(discord, "PATCH", path, components=BUTTONS)
    assert buttons_only.json()["content"] == "The answer"
    shown = discord.messages_in("2001")
    assert [(m["id"], m["content"]) for m in shown] == [
        (first["id"], "The answer"), (second["id"], "two"),
    ]  # fmt: skip
    assert shown[0]["components"] == BUTTONS and shown[1]["edited_timestamp"] is None
    assert discord.messages_in("2002") == []
    edits = await off(discord.wait_edits, 4, message_id=first["id"])
    assert [(e["channel_id"], e["message_id"]) for e in edits] == [("2001", first["id"])] * 4
    assert [e["content"] for e in edits] == [
        "Thinking about it", "The answer", "The answer", None,
    ]  # fmt: skip
    assert [e["components"] for e in edits] == [None, [], [], BUTTONS]
    assert edits == discord.edits and all("at" in e for e in edits)
    assert [s["content"] for s in discord.sent] == ["Thinking", "two"]  # sends only
    assert discord.refused == [] and discord.rate_limited == 0


@pytest.mark.timeout(30)
async def test_an_edit_is_refused_as_discord_refuses_it(discord: FakeDiscord):
    mine = (await rest(discord, "POST", "channels/2001/messages", content="mine")).json()
    theirs = discord.message("a user's", channel_id="2001")
    path = f"channels/2001/messages/{mine['id']}"
    answers = {
        "unknown": await rest(discord, "PATCH", "channels/2001/messages/42", content="x"),
        "another channel": await rest(
            discord, "PATCH", f"channels/2002/messages/{mine['id']}", content="x"
        ),
        "another author's": await rest(
            discord, "PATCH", f"channels/2001/messages/{theirs}", content="x"
        ),
        "over 2000": await rest(discord, "PATCH", path, content="x" * 2001),
        "empty": await rest(discord, "PATCH", path, content=""),
        "bad buttons": await rest(
            discord, "PATCH", path, components=[{"type": 1, "components": []}]
        ),
        "no token": await rest(discord, "PATCH", path, token="wrong", content="x"),
    }
    discord.delete_message(mine["id"])
    answers["deleted"] = await rest(discord, "PATCH", path, content="x")
    got = {why: (a.status_code, a.json()["code"]) for why, a in answers.items()}
    assert got == {
        "unknown": (404, 10008), "another channel": (404, 10008),
        "another author's": (403, 50005), "over 2000": (400, 50035), "empty": (400, 50035),
        "bad buttons": (400, 50035), "no token": (401, 0), "deleted": (404, 10008),
    }  # fmt: skip
    assert answers["unknown"].json()["message"] == "Unknown Message"
    assert answers["another author's"].json()["message"] == (
        "Cannot edit a message authored by another user"
    )
    assert "content" in answers["over 2000"].json()["errors"]
    edits = [r for r in discord.refused if r["route"] == "edits"]
    assert [(r["channel_id"], r["message_id"], r["code"]) for r in edits] == [
        ("2001", "42", 10008), ("2002", mine["id"], 10008), ("2001", theirs, 50005),
        ("2001", mine["id"], 50035), ("2001", mine["id"], 50035), ("2001", mine["id"], 50035),
        ("2001", mine["id"], 10008),
    ]  # fmt: skip
    assert discord.edits == [] and discord.messages_in("2001") == []
    with pytest.raises(LookupError, match="no message"):
        discord.delete_message(mine["id"])
    other = await rest(discord, "GET", path)
    assert other.status_code == 405


@pytest.mark.timeout(30)
async def test_a_429_on_edits_is_injected_and_counted(discord: FakeDiscord):
    message = (await rest(discord, "POST", "channels/2001/messages", content="a")).json()
    path = f"channels/2001/messages/{message['id']}"
    discord.rate_limit("2001", retry_after=2.5, route="edits")
    limited = await rest(discord, "PATCH", path, content="b")
    assert limited.status_code == 429
    assert limited.json() == {"message": "You are being rate limited.", "retry_after": 2.5,
                              "global": False, "code": 0}  # fmt: skip
    assert limited.headers["Retry-After"] == "3"
    assert limited.headers["X-RateLimit-Bucket"] == "edit-2001"
    assert limited.headers["X-RateLimit-Remaining"] == "0"
    discord.rate_limit("2001", retry_after=1.0, route="edits")
    sent = await rest(discord, "POST", "channels/2001/messages", content="c")
    assert sent.status_code == 200  # the edits' fault is not the sends'
    assert (await rest(discord, "PATCH", path, content="b")).status_code == 429
    discord.rate_limit(retry_after=0.5, global_=True, route="*")
    globally = await rest(discord, "PATCH", path, content="b")
    assert globally.status_code == 429 and globally.json()["global"] is True
    assert globally.headers["X-RateLimit-Global"] == "true"
    discord.rate_limit("2001", retry_after=1.0)  # a send's 429 counts too
    assert (await rest(discord, "POST", "channels/2001/messages", content="d")).status_code == 429
    assert (await rest(discord, "PATCH", path, content="b")).status_code == 200
    assert discord.rate_limited == 4
    refused = [(r["route"], r["message_id"], r["retry_after"]) for r in discord.refused]
    assert refused == [
        ("edits", message["id"], 2.5), ("edits", message["id"], 1.0),
        ("edits", message["id"], 0.5), ("messages", None, 1.0),
    ]  # fmt: skip
    assert [e["content"] for e in discord.edits] == ["b"]
    assert [m["content"] for m in discord.messages_in("2001")] == ["b", "c"]


@pytest.mark.timeout(30)
async def test_edits_and_what_a_channel_shows_over_http(discord: FakeDiscord):
    message = (await rest(discord, "POST", "channels/2001/messages", content="a")).json()
    async with httpx.AsyncClient(timeout=10, base_url=discord.url) as control:
        limit = {"channel": "2001", "retry_after": 2.0, "route": "edits"}
        assert (await control.post("/_fake/rate_limit", json=limit)).json()["ok"] is True
        path = f"channels/2001/messages/{message['id']}"
        assert (await rest(discord, "PATCH", path, content="b")).status_code == 429
        assert (await rest(discord, "PATCH", path, content="b")).status_code == 200
        shown = (await control.post("/_fake/messages_in", json={"channel_id": "2001"})).json()
        assert [m["content"] for m in shown["result"]] == ["b"]
        state = (await control.get("/_fake/state")).json()["result"]
        assert state["rate_limited"] == 1 and [e["content"] for e in state["edits"]] == ["b"]
        gone = {"message_id": message["id"]}
        assert (await control.post("/_fake/delete_message", json=gone)).json()["ok"] is True
        again = await control.post("/_fake/delete_message", json=gone)
        assert again.status_code == 400
        shown = (await control.post("/_fake/messages_in", json={"channel_id": "2001"})).json()
        assert shown["result"] == []


async def upload(
    discord: FakeDiscord,
    channel: str,
    payload: dict[str, Any] | str,
    files: list[tuple[str, bytes, str]],
    token: str = TOKEN,
) -> httpx.Response:
    """A multipart create: a `payload_json` part (application/json, as Discord's libraries
    send it) and `files[n]` parts (filename, bytes, content type)."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    parts: dict[str, Any] = {"payload_json": (None, text, "application/json")}
    parts.update({f"files[{n}]": file for n, file in enumerate(files)})
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(
            f"{discord.api_url}/channels/{channel}/messages",
            headers={"Authorization": f"Bot {token}"}, files=parts,
        )  # fmt: skip


async def fetch(url: str) -> httpx.Response:
    """A GET with no Authorization, as from Discord's CDN."""
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(url)


@pytest.mark.timeout(30)
async def test_a_message_with_attachments_and_the_cdn_serving_them(discord: FakeDiscord):
    content = bytes(range(256)) * 4096  # 1 MiB: written in 4 pieces
    notes = discord.add_attachment(content, "notes.txt")
    assert notes["filename"] == "notes.txt" and notes["size"] == len(content)
    assert notes["content_type"] == "text/plain; charset=utf-8"
    assert notes["url"] == notes["proxy_url"]
    assert notes["url"].startswith(f"{discord.url}/attachments/0/{notes['id']}/notes.txt?ex=")
    assert "&is=" in notes["url"] and "&hm=" in notes["url"]
    big = discord.add_attachment(b"abc", "big file.bin", "application/zip", size=600_000)
    assert big["size"] == 600_000 and big["content_type"] == "application/zip"
    assert int(big["id"]) > int(notes["id"])
    with pytest.raises(ValueError, match="less than"):
        discord.add_attachment(b"abcd", "x.bin", size=3)
    async with open_websocket_url(await gateway_url(discord), disconnect_timeout=5) as ws:
        await hello_and_ready(ws)
        message_id = discord.message("", guild_id="500", attachments=[notes, big])
        frame = await receive(ws)
        assert frame["t"] == "MESSAGE_CREATE" and frame["d"]["id"] == message_id
        assert frame["d"]["content"] == "" and frame["d"]["attachments"] == [notes, big]
    served = await fetch(notes["url"])
    assert served.status_code == 200 and served.content == content
    assert served.headers["content-type"] == "text/plain; charset=utf-8"
    assert "X-RateLimit-Bucket" not in served.headers
    padded = await fetch(big["proxy_url"])
    assert padded.status_code == 200 and len(padded.content) == 600_000
    assert padded.content[:3] == b"abc" and padded.content[3:] == bytes(600_000 - 3)
    assert await off(discord.wait_downloads, 2) == [notes["id"], big["id"]]
    assert discord.downloads == [notes["id"], big["id"]]
    assert [c["path"] for c in discord.calls] == ["/api/v10/gateway/bot"]  # the CDN: none


@pytest.mark.timeout(30)
async def test_a_cdn_link_not_signed_as_made_is_gone_and_not_counted(discord: FakeDiscord):
    file = discord.add_attachment(b"secret", "a.txt")
    url, query = file["url"].split("?")
    signed = dict(pair.split("=") for pair in query.strip("&").split("&"))
    forged = "0" * 64 if signed["hm"] != "0" * 64 else "1" * 64
    bad = [
        url,  # no signature
        f"{url}?ex={signed['ex']}&is={signed['is']}&hm={forged}&",
        f"{url}?ex=ffffffff&is={signed['is']}&hm={signed['hm']}&",  # the expiry moved
        file["url"].replace("/a.txt?", "/b.txt?"),
        file["url"].replace(f"/{file['id']}/", "/42/"),
    ]
    for link in bad:
        gone = await fetch(link)
        assert gone.status_code == 404, link
        assert gone.text == "This content is no longer available."
    assert discord.downloads == []
    with pytest.raises(TimeoutError, match="1 download"):
        await off(discord.wait_downloads, 1, 0.1)
    assert (await fetch(file["url"])).content == b"secret"
    assert discord.downloads == [file["id"]]


@pytest.mark.timeout(30)
async def test_a_multipart_create_uploads_its_files(discord: FakeDiscord):
    first = (await rest(discord, "POST", "channels/2001/messages", content="before")).json()
    pdf = b"%PDF-1.4\r\n--boundary-lookalike\r\n\r\n" + bytes(range(256)) * 8
    raw = b"\r\n" * 100 + b"\x00\xff" * 50
    payload = {
        "content": "", "message_reference": {"message_id": first["id"]},
        "attachments": [{"id": 0, "filename": "report.pdf", "description": "the report"}],
    }  # fmt: skip
    answer = await upload(
        discord, "2001", payload, [("x.pdf", pdf, "application/pdf"), ("raw.bin", raw, "image/png")]
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-RateLimit-Bucket"] == "msg-2001"
    message = answer.json()
    assert message["content"] == "" and message["type"] == 19
    assert message["message_reference"]["message_id"] == first["id"]
    report, other = message["attachments"]
    assert report["filename"] == "report.pdf" and report["size"] == len(pdf)
    assert report["description"] == "the report" and report["content_type"] == "application/pdf"
    assert other["filename"] == "raw.bin" and other["size"] == len(raw)  # no entry: taken
    assert "description" not in other and other["content_type"] == "image/png"
    assert report["url"].startswith(f"{discord.url}/attachments/2001/{report['id']}/report.pdf?")
    uploads = await off(discord.wait_uploads, 2)
    assert [(u["filename"], u["size"], u["content"]) for u in uploads] == [
        ("report.pdf", len(pdf), pdf), ("raw.bin", len(raw), raw),
    ]  # fmt: skip
    assert uploads[0]["sha256"] == hashlib.sha256(pdf).hexdigest()
    assert uploads[1]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert {u["message_id"] for u in uploads} == {message["id"]}
    assert [u["attachment_id"] for u in uploads] == [report["id"], other["id"]]
    assert uploads[0]["channel_id"] == "2001" and uploads[0]["text"] == ""
    assert uploads[0]["message_reference"] == {"message_id": first["id"]}
    assert uploads[0]["description"] == "the report" and uploads[1]["description"] is None
    assert "at" in uploads[0]
    assert (await fetch(report["url"])).content == pdf
    assert discord.downloads == [report["id"]]
    assert discord.messages_in("2001")[-1]["attachments"] == [report, other]
    assert discord.sent[-1]["id"] == message["id"] and discord.sent[-1]["content"] == ""
    # more than 1 MiB: its bytes are not kept in the record
    large = bytes(1024 * 1024 + 1)
    answer = await upload(discord, "2001", {"content": "big"}, [("big.bin", large, "a/b")])
    assert answer.status_code == 200
    [record] = discord.uploads[2:]
    assert record["content"] is None and record["size"] == len(large)
    assert record["sha256"] == hashlib.sha256(large).hexdigest() and record["text"] == "big"
    # refused as a JSON create is: faults, empty without files, not JSON
    discord.fail(403, 50013, "Missing Permissions", channel="2001")
    denied = await upload(discord, "2001", {"content": "x"}, [("a.txt", b"a", "text/plain")])
    assert denied.status_code == 403 and denied.json()["code"] == 50013
    empty = await upload(discord, "2001", {"content": ""}, [])
    assert empty.status_code == 400 and empty.json()["code"] == 50035
    garbled = await upload(discord, "2001", "{not json", [("a.txt", b"a", "text/plain")])
    assert garbled.status_code == 400 and garbled.json()["code"] == 50109
    assert len(discord.uploads) == 3 and len(discord.sent) == 3
    assert [r["code"] for r in discord.refused] == [50013, 50035, 50109]


@pytest.mark.timeout(30)
async def test_a_create_over_max_upload_is_413_and_not_recorded(discord: FakeDiscord):
    discord.max_upload = 2000
    too_big = await upload(discord, "2001", {"content": "x"}, [("a.bin", bytes(2000), "a/b")])
    assert too_big.status_code == 413
    assert too_big.json() == {"message": "Request entity too large", "code": 40005}
    assert discord.uploads == [] and discord.sent == [] and discord.messages_in("2001") == []
    assert [(r["status"], r["code"]) for r in discord.refused] == [(413, 40005)]
    fits = await upload(discord, "2001", {"content": "x"}, [("a.bin", bytes(1000), "a/b")])
    assert fits.status_code == 200 and len(discord.uploads) == 1


@pytest.mark.timeout(30)
async def test_an_enforced_nonce_answers_the_message_already_created():
    clock = Clock()
    with FakeDiscord(clock=clock) as discord:
        payload = {"content": "here", "nonce": "n-1", "enforce_nonce": True}
        files = [("a.txt", b"hello", "text/plain")]
        first = await upload(discord, "2001", payload, files)
        again = await upload(discord, "2001", payload, files)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json() and first.json()["nonce"] == "n-1"
        assert len(discord.uploads) == 1 and len(discord.sent) == 1
        assert len(discord.messages_in("2001")) == 1
        # a JSON create with that nonce finds it too; not another channel's
        same = await rest(discord, "POST", "channels/2001/messages", content="here",
                          nonce="n-1", enforce_nonce=True)  # fmt: skip
        assert same.json()["id"] == first.json()["id"]
        elsewhere = await rest(discord, "POST", "channels/2002/messages", content="here",
                               nonce="n-1", enforce_nonce=True)  # fmt: skip
        assert elsewhere.json()["id"] != first.json()["id"]
        # not enforced, or too late: a new message
        loose = await rest(discord, "POST", "channels/2001/messages", content="x", nonce=7)
        assert loose.status_code == 200 and loose.json()["nonce"] == 7
        clock.now += 301
        late = await rest(discord, "POST", "channels/2001/messages", content="x", nonce=7,
                          enforce_nonce=True)  # fmt: skip
        assert late.json()["id"] != loose.json()["id"]
        long = await rest(discord, "POST", "channels/2001/messages", content="x", nonce="n" * 26)
        assert long.status_code == 400 and long.json()["code"] == 50035
        assert [len(discord.sent_to(c)) for c in ("2001", "2002")] == [3, 1]
        assert len(discord.uploads) == 1
        assert discord.internal_errors == []


@pytest.mark.timeout(30)
async def test_attachments_and_uploads_over_http(discord: FakeDiscord):
    async with httpx.AsyncClient(timeout=10, base_url=discord.url) as control:
        added = await control.post(
            "/_fake/add_attachment", json={"content": "héllo", "filename": "h.txt"}
        )
        file = added.json()["result"]
        assert file["size"] == len("héllo".encode())
        assert (await fetch(file["url"])).content == "héllo".encode()
        sent = await control.post("/_fake/message", json={"content": "", "attachments": [file]})
        assert sent.json()["ok"] is True
        uploaded = await upload(discord, "2001", {"content": "up"}, [("u.bin", b"u", "a/b")])
        assert uploaded.status_code == 200
        state = (await control.get("/_fake/state")).json()["result"]
        assert state["downloads"] == [file["id"]]
        [record] = state["uploads"]
        assert record["filename"] == "u.bin" and "content" not in record
        assert discord.uploads[0]["content"] == b"u"


@pytest.mark.timeout(30)
async def test_mentions_are_whom_allowed_mentions_lets_the_content_ping(discord: FakeDiscord):
    asked = discord.message("hi", channel_id="2001", author_id="777")
    loud = "@everyone <@123> <@!124> <@&456> @here"
    reply = {"message_id": asked}

    async def pings(**body: Any) -> tuple[bool, list[str], list[str]]:
        answer = await rest(discord, "POST", "channels/2001/messages", content=loud, **body)
        assert answer.status_code == 200, answer.text
        message = answer.json()
        return (message["mention_everyone"], [u["id"] for u in message["mentions"]],
                message["mention_roles"])  # fmt: skip

    assert await pings() == (True, ["123", "124"], ["456"])  # absent: everything
    assert await pings(message_reference=reply) == (True, ["123", "124", "777"], ["456"])
    nobody = {"parse": []}
    assert await pings(allowed_mentions=nobody, message_reference=reply) == (False, [], [])
    replied = {"parse": [], "replied_user": True}
    assert await pings(allowed_mentions=replied, message_reference=reply) == (False, ["777"], [])
    some = {"parse": ["everyone"], "users": ["124"], "roles": []}
    assert await pings(allowed_mentions=some) == (True, ["124"], [])
    refused = [{"parse": ["users"], "users": ["123"]}, {"parse": ["all"]}, "none",
               {"replied_user": "yes"}, {"roles": ["not an id"]}]  # fmt: skip
    for allowed in refused:
        answer = await rest(discord, "POST", "channels/2001/messages", content="x",
                            allowed_mentions=allowed)  # fmt: skip
        assert (answer.status_code, answer.json()["code"]) == (400, 50035), allowed
        assert "allowed_mentions" in answer.json()["errors"]
    mine = discord.sent[0]["id"]
    edited = await rest(discord, "PATCH", f"channels/2001/messages/{mine}", content="@here",
                        allowed_mentions=nobody)  # fmt: skip
    assert edited.json()["mention_everyone"] is False
    assert discord.edits[0]["allowed_mentions"] == nobody
    assert len(discord.sent) == 5 and len(discord.refused) == len(refused)
