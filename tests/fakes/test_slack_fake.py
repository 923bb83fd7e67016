"""Self-tests of the fake Slack (tests/fakes/slack.py), driven from trio with httpx and
trio-websocket, as the adapter will drive it. The fake's blocking waits run in a
worker thread; nothing sleeps, except to see that no frame comes (a retry that must
not happen, a pong that must not come) for about twice a short ack_timeout."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    WebSocketConnection,
    open_websocket_url,
)

from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, BOT_USER_ID, FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake
        assert fake.internal_errors == []


async def off(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A blocking call of the fake (a wait) in a worker thread."""
    return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def api(
    slack: FakeSlack, method: str, token: str | None = BOT_TOKEN, **params: Any
) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(f"{slack.api_url}/{method}", json=params, headers=headers)


async def get(url: str, token: str | None = BOT_TOKEN, **options: Any) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=10, **options) as client:
        return await client.get(url, headers=headers)


async def socket_url(slack: FakeSlack) -> str:
    answer = (await api(slack, "apps.connections.open", APP_TOKEN)).json()
    assert answer["ok"] is True, answer
    return answer["url"]


async def receive(ws: WebSocketConnection, timeout: float = 5) -> dict[str, Any]:
    with trio.fail_after(timeout):
        return json.loads(await ws.get_message())


async def nothing_within(ws: WebSocketConnection, seconds: float) -> None:
    with trio.move_on_after(seconds):
        frame = await ws.get_message()
        pytest.fail(f"an unexpected frame: {frame}")


async def ack(ws: WebSocketConnection, envelope: dict[str, Any], **extra: Any) -> None:
    await ws.send_message(json.dumps({"envelope_id": envelope["envelope_id"], **extra}))


@pytest.mark.timeout(30)
async def test_auth_test_and_wrong_tokens(slack: FakeSlack):
    me = await api(slack, "auth.test")
    assert me.status_code == 200
    assert me.json() | {
        "ok": True, "team_id": "T0001", "user_id": BOT_USER_ID, "bot_id": "B0001",
        "team": "Test", "user": "hermes",
    } == me.json()  # fmt: skip
    wrong = await api(slack, "auth.test", "xoxb-nope")
    assert wrong.status_code == 200
    assert wrong.json() == {"ok": False, "error": "invalid_auth"}
    assert (await api(slack, "auth.test", None)).json()["error"] == "not_authed"
    assert (await api(slack, "auth.test", APP_TOKEN)).json()["error"] == "not_allowed_token_type"
    async with httpx.AsyncClient(timeout=10) as client:  # a form, the token in it
        form = await client.post(f"{slack.api_url}/auth.test", data={"token": BOT_TOKEN})
    assert form.json()["ok"] is True
    assert [c["token"] for c in slack.calls] == ["bot", "wrong", None, "app", "bot"]
    assert [r["error"] for r in slack.refused] == [
        "invalid_auth", "not_authed", "not_allowed_token_type",
    ]  # fmt: skip


@pytest.mark.timeout(30)
async def test_a_socket_url_is_single_use(slack: FakeSlack):
    bot = await api(slack, "apps.connections.open", BOT_TOKEN)
    assert bot.json() == {"ok": False, "error": "not_allowed_token_type"}
    url = await socket_url(slack)
    assert url.startswith("ws://127.0.0.1:") and "/link/?ticket=" in url
    async with open_websocket_url(url, disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        with pytest.raises(ConnectionRejected) as rejected:
            async with open_websocket_url(url, disconnect_timeout=5):
                pass
        assert rejected.value.status_code == 401
    assert slack.connections_opened == 1 and slack.connection_urls == 1
    assert len(slack.rejected_connections) == 1
    await off(slack.wait_open_sockets, 0)


@pytest.mark.timeout(30)
async def test_hello_on_connect(slack: FakeSlack):
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as first:
        hello = await receive(first)
        assert hello["type"] == "hello" and hello["num_connections"] == 1
        assert hello["connection_info"] == {"app_id": "A0001"}
        assert "host" in hello["debug_info"]
        with trio.fail_after(5):
            await first.ping(b"alive?")  # answered with a pong
        async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as second:
            assert (await receive(second))["num_connections"] == 2
            assert slack.open_sockets == 2
    await off(slack.wait_open_sockets, 0)
    assert slack.max_open_sockets == 2 and slack.connections_opened == 2
    assert [s["closed_by"] for s in slack.sockets] == ["client", "client"]
    assert [s["client_close_code"] for s in slack.sockets] == [1000, 1000]
    assert [s["pings"] for s in slack.sockets] == [1, 0]


@pytest.mark.timeout(30)
async def test_an_event_delivered_and_acknowledged_is_not_retried(slack: FakeSlack):
    slack.configure(ack_timeout=0.3)
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        event_id = slack.message("hi there", thread_ts="1699999999.000100")
        envelope = await receive(ws)
        assert envelope["type"] == "events_api"
        assert envelope["accepts_response_payload"] is False
        assert envelope["retry_attempt"] == 0 and envelope["retry_reason"] == ""
        payload = envelope["payload"]
        assert payload["type"] == "event_callback" and payload["event_id"] == event_id
        assert payload["team_id"] == "T0001"
        event = payload["event"]
        assert event | {
            "type": "message", "text": "hi there", "user": "U1", "channel": "D1",
            "channel_type": "im", "team": "T0001", "thread_ts": "1699999999.000100",
        } == event  # fmt: skip
        assert event["ts"] > "1699999999.000100"
        await ack(ws, envelope)
        assert await off(slack.wait_acked, event_id) == [event_id]
        await nothing_within(ws, 0.8)
    [delivery] = slack.deliveries
    assert delivery["event_id"] == event_id and delivery["written"] is True
    assert delivery["envelope_id"] == envelope["envelope_id"] and delivery["socket"] == 1
    assert slack.acks[0]["event_id"] == event_id and slack.dropped == []


@pytest.mark.timeout(30)
async def test_an_unacknowledged_event_is_retried_with_a_new_envelope(slack: FakeSlack):
    slack.configure(ack_timeout=0.3)
    first_mention = slack.mention("what's up", user="U2", channel="C9")
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        first = await receive(ws)
        assert first["payload"]["event"]["text"] == f"<@{BOT_USER_ID}> what's up"
        assert first["payload"]["event"]["type"] == "app_mention"
        again = await receive(ws)  # not acknowledged: it comes again after 0.3 s
        assert again["retry_attempt"] == 1 and again["retry_reason"] == "timeout"
        assert again["envelope_id"] != first["envelope_id"]
        assert again["payload"] == first["payload"]
        assert again["payload"]["event_id"] == first_mention
        await ack(ws, again)
        await off(slack.wait_acked, first_mention)
    assert [d["retry_attempt"] for d in slack.deliveries] == [0, 1]


@pytest.mark.timeout(30)
async def test_retries_give_up_after_three(slack: FakeSlack):
    slack.configure(ack_timeout=0.1)
    event_id = slack.message("nobody listens")
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        attempts = [(await receive(ws))["retry_attempt"] for _ in range(4)]
        await off(slack.wait_until, lambda f: f.dropped == [event_id], 5, "the drop")
    assert attempts == [0, 1, 2, 3]


@pytest.mark.timeout(30)
async def test_refresh_requested_then_the_fake_closes_the_socket_later(slack: FakeSlack):
    slack.configure(disconnect_close_after=0.5)
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        started = time.monotonic()
        assert slack.disconnect("refresh_requested") == 1
        frame = await receive(ws)
        assert frame["type"] == "disconnect" and frame["reason"] == "refresh_requested"
        assert "debug_info" in frame
        assert slack.open_sockets == 1  # still open: the client may open another first
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
        assert time.monotonic() - started >= 0.4
        assert closed.value.reason.code == 1001
    await off(slack.wait_open_sockets, 0)
    [sock] = slack.sockets
    assert sock["closed_by"] == "fake" and sock["disconnects"] == ["refresh_requested"]


@pytest.mark.timeout(30)
async def test_link_disabled_closes_at_once_and_refuses_new_sockets(slack: FakeSlack):
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        slack.disconnect("link_disabled")
        assert (await receive(ws))["reason"] == "link_disabled"
        with pytest.raises(ConnectionClosed):
            await receive(ws)
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["reason"] == "link_disabled"  # no hello
        with pytest.raises(ConnectionClosed):
            await receive(ws)
    slack.enable_link()
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"


@pytest.mark.timeout(30)
async def test_a_half_open_socket_sends_and_reads_nothing(slack: FakeSlack):
    slack.configure(ack_timeout=0.3)
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as deaf:
        assert (await receive(deaf))["type"] == "hello"
        assert slack.half_open() == 1
        event_id = slack.message("into the void?")
        await nothing_within(deaf, 0.5)
        assert slack.pending == [event_id]  # no socket takes it: it waits
        with trio.move_on_after(0.5) as no_pong:
            await deaf.ping(b"anyone?")
        assert no_pong.cancelled_caught
        async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as live:
            assert (await receive(live))["num_connections"] == 2
            envelope = await receive(live)
            assert envelope["payload"]["event_id"] == event_id
            await ack(deaf, envelope)  # lost: the fake reads nothing from the deaf one
            again = await receive(live)
            assert again["retry_attempt"] == 1
            await ack(live, again)
            await off(slack.wait_acked, event_id)
            assert slack.drop(1) == 1  # the deaf socket's TCP connection is cut
            await off(slack.wait_open_sockets, 1)
    deaf_info = slack.sockets[0]
    assert deaf_info["half_open"] is True and deaf_info["ignored_bytes"] > 0
    assert deaf_info["pings"] == 0
    assert [a["socket"] for a in slack.acks] == [2]
    assert {d["socket"] for d in slack.deliveries} == {2}


@pytest.mark.timeout(30)
async def test_post_message_is_recorded(slack: FakeSlack):
    first = (await api(slack, "chat.postMessage", channel="C1", text="hello", mrkdwn=True)).json()
    assert first["ok"] is True and first["channel"] == "C1"
    assert first["message"]["text"] == "hello" and first["message"]["bot_id"] == "B0001"
    async with httpx.AsyncClient(timeout=10) as client:  # a form, in a thread
        answer = await client.post(
            f"{slack.api_url}/chat.postMessage",
            data={"channel": "D1", "text": "in a thread", "thread_ts": first["ts"]},
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        )
    second = answer.json()
    assert second["ok"] is True and second["ts"] > first["ts"]
    assert second["message"]["thread_ts"] == first["ts"]
    too_long = await api(slack, "chat.postMessage", channel="C1", text="x" * 40_001)
    assert too_long.json() == {"ok": False, "error": "msg_too_long"}
    assert (await api(slack, "chat.postMessage", channel="C1", text="")).json()[
        "error"
    ] == "no_text"
    assert (await api(slack, "chat.postMessage", channel="C1", text="x" * 40_000)).json()["ok"]
    sent = await off(slack.wait_sent, 3)
    assert [s["channel"] for s in sent] == ["C1", "D1", "C1"]
    assert sent[0]["text"] == "hello" and sent[0]["mrkdwn"] is True and "at" in sent[0]
    assert sent[1]["thread_ts"] == first["ts"] and "token" not in sent[1]
    assert [s["text"] for s in slack.sent_to("D1")] == ["in a thread"]
    assert [r["error"] for r in slack.refused] == ["msg_too_long", "no_text"]


def buttons_message(*labels_and_values: tuple[str, str]) -> list[dict[str, Any]]:
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Run `sudo ls`?"}},
        {"type": "actions", "elements": [
            {"type": "button", "action_id": f"hermes_{i}",
             "text": {"type": "plain_text", "text": label}, "value": value}
            for i, (label, value) in enumerate(labels_and_values)
        ]},
    ]  # fmt: skip


@pytest.mark.timeout(30)
async def test_blocks_are_recorded_and_checked(slack: FakeSlack):
    blocks = buttons_message(("Approve", "/approve 1"), ("Deny", "/deny 1"))
    answer = await api(slack, "chat.postMessage", channel="C1", text="Run?", blocks=blocks)
    posted = answer.json()
    assert posted["ok"] is True
    kept = posted["message"]["blocks"]  # Slack gives each block an id
    assert [b["block_id"] for b in kept] == ["fk1", "fk2"]
    assert [{k: v for k, v in b.items() if k != "block_id"} for b in kept] == blocks
    async with httpx.AsyncClient(timeout=10) as client:  # a form: blocks as a JSON string
        form = await client.post(
            f"{slack.api_url}/chat.postMessage",
            data={"channel": "D1", "blocks": json.dumps(blocks)},  # no text: blocks only
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        )
    assert form.json()["ok"] is True
    sent = await off(slack.wait_sent, 2)
    assert sent[0]["blocks"] == blocks and sent[0]["text"] == "Run?"
    assert sent[1]["blocks"] == blocks and "text" not in sent[1]

    def section(text: str) -> list[dict[str, Any]]:
        return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]

    too_many = buttons_message(*[(f"b{i}", f"/b {i}") for i in range(26)])
    twice = buttons_message(("A", "/a"), ("B", "/b"))
    twice[1]["elements"][1]["action_id"] = "hermes_0"
    wrong = {
        "section": section("x" * 3001),
        "value": buttons_message(("Long", "x" * 2001)),
        "label": buttons_message(("x" * 76, "/x")),
        "elements": too_many,
        "action_id": twice,
        "count": section("x") * 51,
    }
    for blocks in wrong.values():
        refused = await api(slack, "chat.postMessage", channel="C1", text="t", blocks=blocks)
        assert refused.json()["error"] == "invalid_blocks", refused.json()
    assert (await api(slack, "chat.postMessage", channel="C1", text="t", blocks="[")).json()[
        "error"
    ] == "invalid_blocks_format"
    edge = await api(slack, "chat.postMessage", channel="C1", text="t", blocks=section("x" * 3000))
    assert edge.json()["ok"] is True and len(slack.sent) == 3
    errors = [r["error"] for r in slack.refused]
    assert errors == ["invalid_blocks"] * len(wrong) + ["invalid_blocks_format"]


@pytest.mark.timeout(30)
async def test_a_press_is_an_interactive_envelope_not_retried(slack: FakeSlack):
    slack.configure(ack_timeout=0.3)
    blocks = buttons_message(("Approve", "/approve 1"), ("Deny", "/deny 1"))
    posted = (await api(slack, "chat.postMessage", channel="C5", text="Run?", blocks=blocks,
                        thread_ts="1699999999.000100")).json()  # fmt: skip
    [sent] = slack.sent
    with pytest.raises(LookupError, match="no button"):
        slack.press(sent, "Maybe")
    with pytest.raises(LookupError, match="no message"):
        slack.press("1.000001", "Approve")
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        pressed = slack.press(sent, "/approve 1", user="U2")  # by its value
        envelope = await receive(ws)
        assert envelope["type"] == "interactive"
        assert envelope["accepts_response_payload"] is False and "retry_attempt" not in envelope
        payload = envelope["payload"]
        assert payload | {
            "type": "block_actions", "trigger_id": pressed, "team": {"id": "T0001",
            "domain": "test"}, "channel": {"id": "C5", "name": "general"},
            "user": {"id": "U2", "username": "u2", "name": "u2", "team_id": "T0001"},
            "container": {"type": "message", "message_ts": sent["ts"], "channel_id": "C5",
                          "is_ephemeral": False, "thread_ts": "1699999999.000100"},
            "response_url": f"{slack.url}/_slack/response/{pressed}",
        } == payload  # fmt: skip
        assert payload["message"] == posted["message"]  # as Slack keeps it: blocks, thread
        [action] = payload["actions"]
        assert action | {
            "action_id": "hermes_0", "block_id": "fk2", "value": "/approve 1", "type": "button",
            "text": {"type": "plain_text", "text": "Approve"},
        } == action  # fmt: skip
        assert action["action_ts"] > sent["ts"]
        await ack(ws, envelope)
        assert await off(slack.wait_acked, pressed) == [pressed]

        ignored = slack.press(sent["ts"], "Deny")  # by its label; nobody acknowledges it
        assert (await receive(ws))["payload"]["actions"][0]["value"] == "/deny 1"
        await off(slack.wait_until, lambda f: f.dropped == [ignored], 5, "the drop")
        await nothing_within(ws, 0.6)  # not retried

        slack.redeliver(pressed)  # once more, though acknowledged
        again = await receive(ws)
        assert again["envelope_id"] != envelope["envelope_id"]
        assert again["payload"] == payload
        await ack(ws, again)
        acks = await off(slack.wait_acks, 2, event_id=pressed)
        assert [a["envelope_id"] for a in acks] == [envelope["envelope_id"], again["envelope_id"]]
    assert slack.acked == [pressed]  # named once
    assert [d["event_id"] for d in slack.deliveries] == [pressed, ignored, pressed]


@pytest.mark.timeout(30)
async def test_faults_and_a_rate_limit_with_retry_after(slack: FakeSlack):
    slack.fail("chat.postMessage", "ratelimited", retry_after=2)
    slack.fail("chat.postMessage", "channel_not_found", channel="C404")
    slack.fail("chat.postMessage", "internal_error", status=500)
    limited = await api(slack, "chat.postMessage", channel="C1", text="one")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert limited.json() == {"ok": False, "error": "ratelimited"}
    missing = await api(slack, "chat.postMessage", channel="C404", text="two")
    assert missing.status_code == 200 and missing.json()["error"] == "channel_not_found"
    broken = await api(slack, "chat.postMessage", channel="C1", text="three")
    assert broken.status_code == 500 and broken.json()["error"] == "internal_error"
    assert (await api(slack, "chat.postMessage", channel="C1", text="four")).json()["ok"]
    refused = await off(slack.wait_refused, 3, method="chat.postMessage")
    assert [(r["error"], r["status"], r["retry_after"]) for r in refused] == [
        ("ratelimited", 429, 2.0), ("channel_not_found", 200, None),
        ("internal_error", 500, None),
    ]  # fmt: skip
    assert refused[1]["channel"] == "C404"
    assert [s["text"] for s in slack.sent] == ["four"]


def without_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "block_id"} for b in blocks]


@pytest.mark.timeout(30)
async def test_chat_update_replaces_what_a_user_sees(slack: FakeSlack):
    blocks = buttons_message(("Approve", "/approve 1"), ("Deny", "/deny 1"))
    posted = (await api(slack, "chat.postMessage", channel="C5", text="Run?", blocks=blocks,
                        thread_ts="1699999999.000100")).json()  # fmt: skip
    ts = posted["ts"]
    other = (await api(slack, "chat.postMessage", channel="C5", text="later")).json()["ts"]
    await api(slack, "chat.postMessage", channel="D1", text="elsewhere")
    text_only = (await api(slack, "chat.update", channel="C5", ts=ts, text="Run it?")).json()
    assert text_only | {"ok": True, "channel": "C5", "ts": ts, "text": "Run it?"} == text_only
    kept = text_only["message"]  # blocks left out: kept as they were, ids and all
    assert kept["text"] == "Run it?" and kept["blocks"] == posted["message"]["blocks"]
    assert kept["edited"]["user"] == BOT_USER_ID and kept["edited"]["ts"] > other
    new_blocks = buttons_message(("Go", "/go"))
    swapped = (await api(slack, "chat.update", channel="C5", ts=ts, text="Go?",
                         blocks=new_blocks)).json()  # fmt: skip
    assert without_ids(swapped["message"]["blocks"]) == new_blocks
    assert [b["block_id"] for b in swapped["message"]["blocks"]] == ["fk3", "fk4"]
    pressed = slack.press(ts, "Go")  # the new buttons are the message's
    assert slack.payload(pressed)["message"]["text"] == "Go?"
    async with httpx.AsyncClient(timeout=10) as client:  # a form: blocks "[]" removes them
        form = await client.post(
            f"{slack.api_url}/chat.update",
            data={"channel": "C5", "ts": ts, "text": "Done.", "blocks": "[]"},
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        )
    assert form.json()["ok"] is True and "blocks" not in form.json()["message"]
    same = await api(slack, "chat.update", channel="C5", ts=ts, text="Done.", blocks=[])
    assert same.json()["ok"] is True  # the same again: ok, no "not modified"
    with pytest.raises(LookupError, match="no button"):
        slack.press(ts, "Go")
    shown = slack.messages_in("C5")
    assert [(m["ts"], m["text"]) for m in shown] == [(ts, "Done."), (other, "later")]
    assert shown[0]["thread_ts"] == "1699999999.000100" and "blocks" not in shown[0]
    assert shown[0]["edited"]["ts"] > kept["edited"]["ts"] and "edited" not in shown[1]
    assert [m["text"] for m in slack.messages_in("D1")] == ["elsewhere"]
    edits = await off(slack.wait_edits, 4, ts=ts)
    assert [(e["channel"], e["ts"], e["text"], e["blocks"]) for e in edits] == [
        ("C5", ts, "Run it?", None), ("C5", ts, "Go?", new_blocks), ("C5", ts, "Done.", []),
        ("C5", ts, "Done.", []),
    ]  # fmt: skip
    assert all("at" in e for e in edits) and len(slack.sent) == 3
    assert [s["text"] for s in slack.sent_to("C5")] == ["Run?", "later"]  # as posted
    assert slack.refused == []


@pytest.mark.timeout(30)
async def test_chat_update_errors(slack: FakeSlack):
    ts = (await api(slack, "chat.postMessage", channel="C5", text="hello")).json()["ts"]
    theirs = slack.payload(slack.message("a user's", channel="C5"))["event"]["ts"]
    mention = slack.payload(slack.mention("hey", channel="C5"))["event"]["ts"]

    async def update(**params: Any) -> httpx.Response:
        return await api(slack, "chat.update", **params)

    errors = {
        "message_not_found": [
            dict(channel="C5", ts="1.000001", text="x"),
            dict(channel="C6", ts=ts, text="x"),  # not in that channel
            dict(channel="C5", text="x"),
        ],
        "cant_update_message": [
            dict(channel="C5", ts=theirs, text="x"),
            dict(channel="C5", ts=mention, text="x"),
        ],
        "channel_not_found": [dict(ts=ts, text="x")],
        "no_text": [dict(channel="C5", ts=ts, text="", blocks=[])],
        "msg_too_long": [dict(channel="C5", ts=ts, text="x" * 40_001)],
        "invalid_blocks": [
            dict(channel="C5", ts=ts, text="x", blocks=buttons_message(("x" * 76, "/x")))
        ],
        "invalid_blocks_format": [dict(channel="C5", ts=ts, text="x", blocks="[")],
    }
    for error, calls in errors.items():
        for params in calls:
            answer = await update(**params)
            assert (answer.status_code, answer.json()["error"]) == (200, error), params
    assert (await update(channel="C5", ts=ts, token=APP_TOKEN)).json()[
        "error"
    ] == "not_allowed_token_type"
    slack.fail("chat.update", "edit_window_closed", channel="C5")
    slack.fail("chat.update", "ratelimited", retry_after=4)
    closed = await update(channel="C5", ts=ts, text="x")
    assert (closed.status_code, closed.json()["error"]) == (200, "edit_window_closed")
    limited = await update(channel="C5", ts=ts, text="x")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "4"
    assert limited.json() == {"ok": False, "error": "ratelimited"}
    assert (await update(channel="C5", ts=ts, text="x" * 40_000)).json()["ok"] is True
    slack.delete_message(ts)
    assert (await update(channel="C5", ts=ts, text="y")).json()["error"] == "message_not_found"
    with pytest.raises(LookupError, match="no message"):
        slack.delete_message(ts)
    assert [e["text"] for e in slack.edits] == ["x" * 40_000] and slack.messages_in("C5") == []
    refused = await off(slack.wait_refused, 14, method="chat.update")
    assert len(refused) == 14
    assert [r["retry_after"] for r in refused if r["status"] == 429] == [4.0]
    assert slack.rate_limited == 1


@pytest.mark.timeout(30)
async def test_an_update_comes_back_as_message_changed_when_echoed(slack: FakeSlack):
    ts = (await api(slack, "chat.postMessage", channel="C5", text="one")).json()["ts"]
    slack.configure(echo_bot_messages=True)
    assert (await api(slack, "chat.update", channel="C5", ts=ts, text="two")).json()["ok"]
    [key] = slack.pending
    event = slack.payload(key)["event"]
    assert event | {"type": "message", "subtype": "message_changed", "channel": "C5",
                    "channel_type": "channel", "hidden": True} == event  # fmt: skip
    assert event["message"]["text"] == "two" and event["previous_message"]["text"] == "one"
    assert event["message"]["ts"] == ts and event["ts"] == event["message"]["edited"]["ts"]


@pytest.mark.timeout(30)
async def test_events_wait_for_a_socket_across_restarts(slack: FakeSlack):
    first = slack.message("one", channel_type="channel")
    second = slack.message("two", channel="G7", channel_type="group", bot_id="B0002")
    assert slack.pending == [first, second]
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        one, two = await receive(ws), await receive(ws)
        assert one["payload"]["event"]["channel"] == "C1"
        assert (
            two["payload"]["event"] | {"channel": "G7", "bot_id": "B0002"}
            == (two["payload"]["event"])
        )
        await ack(ws, one)
        await ack(ws, two)
        await off(slack.wait_acked, 2)
    await off(slack.wait_open_sockets, 0)
    command = slack.slash("/hermes", "status", user="U3", channel="D3")
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        envelope = await receive(ws)
        assert envelope["type"] == "slash_commands"
        assert envelope["accepts_response_payload"] is True
        payload = envelope["payload"]
        assert payload | {
            "command": "/hermes", "text": "status", "user_id": "U3", "channel_id": "D3",
            "team_id": "T0001", "trigger_id": command,
        } == payload  # fmt: skip
        await ack(ws, envelope, payload={"text": "ok"})
        assert await off(slack.wait_acked, command) == [first, second, command]
    assert slack.acks[-1]["payload"] == {"text": "ok"}
    assert slack.connections_opened == 2


@pytest.mark.timeout(30)
async def test_a_shared_file_is_delivered_and_downloaded_with_the_bot_token(slack: FakeSlack):
    content = b"line one\nline two\n"
    notes = slack.add_file(content, "notes 1.txt")
    assert notes | {
        "id": "F00000001", "name": "notes 1.txt", "title": "notes 1.txt",
        "mimetype": "text/plain", "filetype": "text", "size": len(content), "mode": "hosted",
        "user": "U1", "is_external": False,
    } == notes  # fmt: skip
    where = f"{slack.url}/files-pri/T0001-F00000001"
    assert notes["url_private"] == f"{where}/notes%201.txt"
    assert notes["url_private_download"] == f"{where}/download/notes%201.txt"
    assert isinstance(notes["created"], int)
    big = slack.add_file(b"PK", "big.zip", size=600_000, user="U2")  # 600 kB, 2 bytes kept
    assert (big["id"], big["size"], big["mimetype"], big["user"]) == (
        "F00000002", 600_000, "application/zip", "U2",
    )  # fmt: skip
    async with open_websocket_url(await socket_url(slack), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        event_id = slack.message("", files=[notes, big], channel="C5", channel_type="channel")
        envelope = await receive(ws)
        event = envelope["payload"]["event"]
        assert event | {
            "type": "message", "subtype": "file_share", "text": "", "files": [notes, big],
            "upload": True, "display_as_bot": False, "user": "U1", "channel": "C5",
        } == event  # fmt: skip
        await ack(ws, envelope)
        await off(slack.wait_acked, event_id)
    mention = slack.payload(slack.mention("look", files=[notes]))["event"]
    assert mention["files"] == [notes] and mention["upload"] is False
    assert mention["type"] == "app_mention" and "subtype" not in mention

    downloaded = await get(notes["url_private_download"])
    assert downloaded.status_code == 200 and downloaded.content == content
    assert downloaded.headers["content-type"] == "text/plain"
    assert downloaded.headers["content-disposition"] == "attachment; filename*=UTF-8''notes%201.txt"
    inline = await get(notes["url_private"])
    assert inline.content == content and "content-disposition" not in inline.headers
    whole = await get(big["url_private_download"])  # in 256 KiB pieces: the 2 bytes, zeros
    assert whole.content == b"PK" + bytes(599_998)
    assert await off(slack.wait_downloads, 3) == [notes["id"], notes["id"], big["id"]]
    assert await off(slack.wait_downloads, 1, file_id=big["id"]) == [big["id"]]
    unknown = await get(f"{slack.url}/files-pri/T0001-F00000009/download/notes%201.txt")
    renamed = await get(notes["url_private_download"].replace("notes%201", "notes"))
    assert (unknown.status_code, renamed.status_code) == (404, 404)
    assert len(slack.downloads) == 3


@pytest.mark.timeout(30)
async def test_a_download_without_the_bot_token_is_a_sign_in_page(slack: FakeSlack):
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    photo = slack.add_file(png, "photo.png")
    assert (photo["mimetype"], photo["filetype"]) == ("image/png", "png")
    for token in (None, "xoxb-wrong", APP_TOKEN):
        answer = await get(photo["url_private_download"], token)
        assert answer.status_code == 302, token
        assert answer.headers["location"].startswith(f"{slack.url}/signin?redir=%2Ffiles-pri")
    followed = await get(photo["url_private"], None, follow_redirects=True)  # the classic bug
    assert followed.status_code == 200 and followed.content != png
    assert followed.headers["content-type"].startswith("text/html")
    assert followed.content.lstrip().lower().startswith(b"<!doctype html")
    assert slack.downloads == []
    with pytest.raises(TimeoutError, match="1 download"):
        await off(slack.wait_downloads, 1, 0.1)


@pytest.mark.timeout(30)
async def test_the_upload_flow_shares_files_in_a_thread(slack: FakeSlack):
    parent = (await api(slack, "chat.postMessage", channel="C5", text="Here you go")).json()["ts"]
    report = b"a,b\n1,2\n"
    big = bytes(range(256)) * 6000  # 1.5 MB: not kept in its record
    notes = b"# notes\n" * 1000
    auth = {"Authorization": f"Bearer {BOT_TOKEN}"}
    async with httpx.AsyncClient(timeout=10) as client:
        first = (await client.post(
            f"{slack.api_url}/files.getUploadURLExternal",
            data={"filename": "report.csv", "length": str(len(report))}, headers=auth,
        )).json()  # a form  # fmt: skip
        assert first["ok"] is True and first["file_id"] == "F00000001"
        assert first["upload_url"].startswith(f"{slack.url}/upload/v1/")
        taken = await client.post(first["upload_url"], content=report)  # the raw bytes
        assert (taken.status_code, taken.text) == (200, f"OK - {len(report)}")
        assert taken.headers["content-type"].startswith("text/plain")
        assert (await client.post(first["upload_url"], content=report)).status_code == 404
    second = (await api(slack, "files.getUploadURLExternal", filename="dump.bin",
                        length=len(big), alt_txt="a dump")).json()  # fmt: skip
    third = (await api(slack, "files.getUploadURLExternal", filename="notes.md",
                       length=len(notes), snippet_type="markdown")).json()  # fmt: skip

    async def streamed() -> Any:  # chunked transfer encoding
        for start in range(0, len(notes), 3000):
            yield notes[start : start + 3000]

    async with httpx.AsyncClient(timeout=10) as client:
        form = await client.post(second["upload_url"], files={"file": ("dump.bin", big)})
        assert (form.status_code, form.text) == (200, f"OK - {len(big)}")
        chunked = await client.post(third["upload_url"], content=streamed())
        assert (chunked.status_code, chunked.text) == (200, f"OK - {len(notes)}")
    assert slack.uploads == [] and len(slack.messages_in("C5")) == 1  # not completed yet

    ids = [first["file_id"], second["file_id"], third["file_id"]]
    done = (await api(
        slack, "files.completeUploadExternal", channel_id="C5", thread_ts=parent,
        initial_comment="Three files", files=[{"id": ids[0], "title": "The report"},
                                              {"id": ids[1]}, {"id": ids[2]}],
    )).json()  # fmt: skip
    assert done["ok"] is True
    assert [(f["id"], f["title"], f["name"], f["size"], f["mimetype"]) for f in done["files"]] == [
        (ids[0], "The report", "report.csv", len(report), "text/csv"),
        (ids[1], "dump.bin", "dump.bin", len(big), "application/octet-stream"),
        (ids[2], "notes.md", "notes.md", len(notes), "text/markdown"),
    ]  # fmt: skip
    assert done["files"][1]["alt_txt"] == "a dump"
    assert {f["user"] for f in done["files"]} == {BOT_USER_ID}
    first_shown, share = slack.messages_in("C5")  # before the answer came
    assert first_shown["text"] == "Here you go"
    assert share | {
        "type": "message", "subtype": "file_share", "text": "Three files", "upload": True,
        "files": done["files"], "thread_ts": parent, "user": BOT_USER_ID, "bot_id": "B0001",
    } == share  # fmt: skip
    uploads = await off(slack.wait_uploads, 3, channel="C5")
    assert [(u["file_id"], u["filename"], u["title"], u["length"]) for u in uploads] == [
        (ids[0], "report.csv", "The report", len(report)),
        (ids[1], "dump.bin", "dump.bin", len(big)), (ids[2], "notes.md", "notes.md", len(notes)),
    ]  # fmt: skip
    assert [u["sha256"] for u in uploads] == [
        hashlib.sha256(data).hexdigest() for data in (report, big, notes)
    ]  # fmt: skip
    assert [u["content"] for u in uploads] == [report, None, notes]
    assert {(u["channel"], u["thread_ts"], u["initial_comment"], u["ts"]) for u in uploads} == {
        ("C5", parent, "Three files", share["ts"])
    }  # fmt: skip
    assert (uploads[1]["alt_txt"], uploads[2]["snippet_type"]) == ("a dump", "markdown")
    assert all(isinstance(u["at"], float) for u in uploads)
    # the bot's files are served as a user's (the one over 1 MiB was not kept)
    assert (await get(done["files"][0]["url_private_download"])).content == report
    assert (await get(done["files"][1]["url_private_download"])).status_code == 404

    private = (await api(slack, "files.getUploadURLExternal", filename="x.txt", length=1)).json()
    async with httpx.AsyncClient(timeout=10) as client:
        assert (await client.post(private["upload_url"], content=b"x")).status_code == 200
        kept = (await client.post(  # a form: files as JSON text; no channel: not shared
            f"{slack.api_url}/files.completeUploadExternal",
            data={"files": json.dumps([{"id": private["file_id"]}])}, headers=auth,
        )).json()  # fmt: skip
        state = (await client.get(f"{slack.url}/_fake/state")).json()["result"]
    assert kept["ok"] is True and kept["files"][0]["title"] == "x.txt"
    assert (slack.uploads[-1]["channel"], slack.uploads[-1]["ts"]) == (None, None)
    assert len(slack.messages_in("C5")) == 2 and slack.sent_to("C5")[0]["text"] == "Here you go"
    assert [u.get("content_base64") for u in state["uploads"]] == [
        base64.b64encode(report).decode(), None, base64.b64encode(notes).decode(), "eA==",
    ]  # fmt: skip
    assert slack.refused == []


@pytest.mark.timeout(30)
async def test_uploads_refused(slack: FakeSlack):
    slack.configure(max_upload=100)

    async def upload_url(**params: Any) -> dict[str, Any]:
        return (await api(slack, "files.getUploadURLExternal", **params)).json()

    async def complete(**params: Any) -> dict[str, Any]:
        return (await api(slack, "files.completeUploadExternal", **params)).json()

    no_name = await upload_url(length=3)
    assert no_name["error"] == "invalid_arguments"
    assert "filename" in no_name["response_metadata"]["messages"][0]
    for length in (None, "three", -1, 2.5, True):
        params = {} if length is None else {"length": length}
        assert (await upload_url(filename="a.txt", **params))["error"] == "invalid_arguments"
    assert (await upload_url(filename="a.txt", length=0))["error"] == "missing_argument"
    assert (await upload_url(filename="a.txt", length=101))["error"] == "file_too_large"
    assert (await upload_url(filename="a.txt", alt_txt="x" * 1001, length=1))[
        "error"
    ] == "alt_txt_too_large"
    assert (await upload_url(filename="a.txt", length=100))["ok"] is True

    issued = await upload_url(filename="a.txt", length=5)
    async with httpx.AsyncClient(timeout=10) as client:
        short = await client.post(issued["upload_url"], content=b"four")
        assert (short.status_code, short.text) == (400, "length mismatch")
        no_file = await client.post(issued["upload_url"], files={"note": (None, b"hello")})
        assert no_file.status_code == 400
        unknown = await client.post(f"{slack.url}/upload/v1/nope", content=b"hello")
        assert unknown.status_code == 404
    assert (await complete(files=[{"id": issued["file_id"]}]))["error"] == "file_not_found"
    assert (await complete(files=[{"id": "F99999999"}]))["error"] == "file_not_found"
    async with httpx.AsyncClient(timeout=10) as client:  # the URL is still good after a 400
        assert (await client.post(issued["upload_url"], content=b"hello")).status_code == 200
    one = [{"id": issued["file_id"]}]
    for wrong in (
        {"files": []},
        {"files": "["},
        {"files": [{"title": "no id"}]},
        {"files": one * 2},
        {"files": one, "thread_ts": "1699999999.000100"},
        {"files": one, "channels": "C1"},
        {},
    ):
        assert (await complete(**wrong))["error"] == "invalid_arguments", wrong
    # one file not uploaded: none is completed
    assert (await complete(files=[*one, {"id": "F99999999"}]))["error"] == "file_not_found"
    assert (await complete(files=one, channel_id="C5"))["ok"] is True
    assert (await complete(files=one, channel_id="C5"))["error"] == "file_not_found"  # once
    assert [u["file_id"] for u in slack.uploads] == [issued["file_id"]]
    assert len(slack.messages_in("C5")) == 1
    app = await api(slack, "files.getUploadURLExternal", APP_TOKEN, filename="a", length=1)
    assert app.json()["error"] == "not_allowed_token_type"
    refused = await off(slack.wait_refused, 21)
    assert len(refused) == 21
    assert {r["method"] for r in refused} == {
        "files.getUploadURLExternal", "files.completeUploadExternal",
    }  # fmt: skip


@pytest.mark.timeout(30)
async def test_faults_on_the_upload_methods(slack: FakeSlack):
    issued = (await api(slack, "files.getUploadURLExternal", filename="a.txt", length=2)).json()
    async with httpx.AsyncClient(timeout=10) as client:
        assert (await client.post(issued["upload_url"], content=b"hi")).status_code == 200
    slack.fail("files.completeUploadExternal", "ratelimited", retry_after=3)
    slack.fail("files.completeUploadExternal", "internal_error", status=500, channel="C7")
    slack.fail("files.getUploadURLExternal", "file_uploads_disabled")
    files = [{"id": issued["file_id"]}]
    limited = await api(slack, "files.completeUploadExternal", files=files, channel_id="C7")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "3"
    assert limited.json() == {"ok": False, "error": "ratelimited"}
    broken = await api(slack, "files.completeUploadExternal", files=files, channel_id="C7")
    assert broken.status_code == 500 and broken.json()["error"] == "internal_error"
    assert slack.uploads == [] and slack.messages_in("C7") == []  # a fault takes nothing
    done = await api(slack, "files.completeUploadExternal", files=files, channel_id="C7")
    assert done.json()["ok"] is True
    [upload] = await off(slack.wait_uploads, 1, channel="C7")
    assert upload["content"] == b"hi" and upload["ts"] == slack.messages_in("C7")[0]["ts"]
    disabled = await api(slack, "files.getUploadURLExternal", filename="b.txt", length=1)
    assert disabled.json() == {"ok": False, "error": "file_uploads_disabled"}
    refused = await off(slack.wait_refused, 2, method="files.completeUploadExternal")
    assert [(r["error"], r["status"], r["retry_after"], r["channel"]) for r in refused] == [
        ("ratelimited", 429, 3.0, "C7"), ("internal_error", 500, None, "C7"),
    ]  # fmt: skip
    assert slack.rate_limited == 1


@pytest.mark.timeout(30)
async def test_close_is_prompt_with_sockets_open():
    fake = FakeSlack().__enter__()
    async with open_websocket_url(await socket_url(fake), disconnect_timeout=5) as ws:
        assert (await receive(ws))["type"] == "hello"
        started = time.monotonic()
        fake.close()
        assert time.monotonic() - started < 2
        with pytest.raises(ConnectionClosed):
            await receive(ws)
    assert fake.internal_errors == []


@pytest.mark.timeout(30)
def test_the_fake_runs_in_its_own_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.slack"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        event = httpx.post(f"{url}/_fake/message", json={"text": "hi"}, timeout=5).json()
        assert event["ok"] is True
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert state["pending"] == [event["result"]] and state["connections_opened"] == 0
        posted = httpx.post(
            f"{url}/api/chat.postMessage",
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
            json={"channel": "D1", "text": "Run?", "blocks": buttons_message(("Go", "/go"))},
            timeout=5,
        ).json()
        press = httpx.post(
            f"{url}/_fake/press",
            json={"message": posted["ts"], "button": "Go", "user": "U2"},
            timeout=5,
        ).json()
        assert press["ok"] is True
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert state["pending"] == [event["result"], press["result"]]
        assert state["sent"][0]["blocks"] == buttons_message(("Go", "/go"))
        updated = httpx.post(
            f"{url}/api/chat.update",
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
            json={"channel": "D1", "ts": posted["ts"], "text": "Ran.", "blocks": []},
            timeout=5,
        ).json()
        assert updated["ok"] is True
        shown = httpx.post(f"{url}/_fake/messages_in", json={"channel": "D1"}, timeout=5).json()
        assert [m["text"] for m in shown["result"]] == ["Ran."]
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert [e["text"] for e in state["edits"]] == ["Ran."] and state["rate_limited"] == 0
        bad = httpx.post(f"{url}/_fake/disconnect", json={}, timeout=5)
        assert bad.status_code == 400 and "no open socket" in bad.json()["error"]
        me = httpx.post(
            f"{url}/api/auth.test", headers={"Authorization": f"Bearer {BOT_TOKEN}"}, timeout=5
        )
        assert me.json()["user_id"] == BOT_USER_ID
        added = httpx.post(
            f"{url}/_fake/add_file", json={"content": "héllo", "name": "a.txt"}, timeout=5
        ).json()["result"]
        downloaded = httpx.get(
            added["url_private_download"],
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
            timeout=5,
        )
        assert downloaded.content == "héllo".encode()
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert state["downloads"] == [added["id"]] and state["uploads"] == []
    finally:
        proc.terminate()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
