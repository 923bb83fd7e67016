"""Slack for bench/chat.py: the fake Slack and a bare Socket Mode echo client.

Run: python bench/chat.py slack [--rate R]
- The fake (tests/fakes/slack.py: the Web API and Socket Mode on one port):
  `_fake/message` injects a user's message in their DM (user U<i> in channel D<i>;
  an events_api envelope, delivered on an open socket) and answers the event's id;
  its state lists the chat.postMessage calls (`sent`), the envelopes delivered and
  the acknowledgements it got, each with its `at`.
- bare: `echo_client`, trio + trio_websocket + httpx: apps.connections.open with
  the app token, the socket URL opened, `hello` awaited; each envelope acknowledged
  at once (`{"envelope_id": ...}`), and for a `message` event a task posting
  `chat.postMessage(channel, "You said: " + text)` with the bot token, so posts run
  concurrently with the socket's reading.
- hermes: its Slack adapter in Socket Mode. Per event it commits the journal before
  the acknowledgement, runs the turn, and posts the reply from the outbox (text
  escaped for mrkdwn: &, <, > only; the bench's texts have none).
- A reply is matched to its message by its text (each carries a unique marker).
  Checked besides: every event acknowledged exactly once, none redelivered (a retry
  means an acknowledgement later than the fake's 3 s), none dropped.
- `where` splits the latency at the acknowledgement the fake records: inject -> ack
  (the envelope's delivery, and for hermes the journal commit) and ack -> reply (the
  turn, the outbox row, the pacing, the post). The fake records acks on its
  socket's thread and posts on an HTTP one: the bare client's post, sent just after
  its ack, is sometimes recorded first (those are left out of it).
- The pace (hermes/delivery/outbox.py PACES): 50 messages/s overall after a burst
  of 50, 1/s per chat after a burst of 3: the default 50/s over 50 chats, one a
  second each, is right at it (`--rate 25`: half of it).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import trio
from chat import Fake, Injected, Platform, Side, first_times
from trio_websocket import open_websocket_url

from tests.fakes.slack import APP_TOKEN, BOT_TOKEN

BOT_ENV, APP_ENV = "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"


async def echo_client(url: str) -> None:
    """apps.connections.open, the socket opened, hello awaited; each envelope acknowledged
    at once, each message event answered by a task of its own posting on a client of
    its own. Runs until cancelled."""
    async with (
        httpx.AsyncClient(timeout=30) as opener,
        httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {BOT_TOKEN}"}) as poster,
        trio.open_nursery() as nursery,
    ):

        async def answer(event: dict[str, Any]) -> None:
            params = {"channel": event["channel"], "text": "You said: " + event["text"]}
            body = (await poster.post(f"{url}/api/chat.postMessage", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"chat.postMessage refused: {body!r}")

        headers = {"authorization": f"Bearer {APP_TOKEN}"}
        body = (await opener.post(f"{url}/api/apps.connections.open", headers=headers)).json()
        if not body.get("ok"):
            raise RuntimeError(f"apps.connections.open refused: {body!r}")
        async with open_websocket_url(body["url"]) as ws:
            hello = json.loads(await ws.get_message())
            if hello.get("type") != "hello":
                raise RuntimeError(f"the socket began with {hello!r}")
            while True:
                frame = json.loads(await ws.get_message())
                if "envelope_id" not in frame:
                    continue  # a disconnect: not expected here
                await ws.send_message(json.dumps({"envelope_id": frame["envelope_id"]}))
                if frame.get("type") != "events_api":
                    continue
                event = frame["payload"]["event"]
                if event.get("type") == "message" and "bot_id" not in event and "text" in event:
                    nursery.start_soon(answer, event)


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def retries(state: dict[str, Any]) -> int:
    """Envelopes redelivered (retry_attempt > 0)."""
    return sum(1 for d in state["deliveries"] if d["retry_attempt"] > 0)


class Slack(Platform):
    name = "slack"
    fake = "Slack (Web API, Socket Mode)"
    client = "trio + trio_websocket + httpx echo client"
    chat_field = "channel"
    split = ("acked before their reply", "inject -> ack recorded (delivery, admission)",
             "ack -> reply (turn, outbox, pace, post)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  slack:\n    token_env: {BOT_ENV}\n    app_token_env: {APP_ENV}\n"
                f"    base_url: '{fake_url}'\n    allow_all_users: true\n")  # fmt: skip
        return yaml, {BOT_ENV: BOT_TOKEN, APP_ENV: APP_TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        return f"U{i}", f"D{i}"

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"text": injected.text, "user": injected.user, "channel": injected.chat,
                  "channel_type": "im"}  # fmt: skip
        return str(await fake.inject(http, "message", kwargs))

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """By the reply's text."""
        return {"You said: " + injected.text: n for n, injected in enumerate(side.injected)}

    def answers(self, post: dict[str, Any]) -> Any:
        return self.text(post)

    def text(self, post: dict[str, Any]) -> str:
        return unescape(str(post.get("text", "")))

    def check(self, side: Side, state: dict[str, Any]) -> None:
        acked = Counter(state["acked"])
        unacked = [(n, acked[injected.id]) for n, injected in enumerate(side.injected)
                   if acked[injected.id] != 1]  # fmt: skip
        if unacked:
            side.problems.append(f"{len(unacked)} events not acknowledged exactly once "
                                 f"(message, times): {unacked[:5]}")  # fmt: skip
        if retries(state):
            side.problems.append(f"{retries(state)} envelopes redelivered (an ack later than "
                                 "the fake's 3 s)")  # fmt: skip
        if state["dropped"]:
            side.problems.append(f"{len(state['dropped'])} events dropped unacknowledged")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        envelopes = len(state["deliveries"]) - len(before["deliveries"])
        acks = len(state["acks"]) - len(before["acks"])
        return f"{envelopes} envelopes, {acks} acks, {retries(state)} redelivered"

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """Each event's first acknowledgement."""
        return first_times(state["acks"], "event_id")


PLATFORM = Slack()
