"""Mattermost for bench/chat.py: the fake server and a bare WebSocket echo client.

Run: python bench/chat.py mattermost [--rate R]   (about three minutes)
- The fake (tests/fakes/mattermost.py: API v4 and its WebSocket on one port):
  `_fake/message` makes user u<i> post in their DM with the bot (channel dm-u<i>, type
  D), pushed as a `posted` event on every authenticated socket, and answers the post's
  id; its state lists the bot's posts (`sent`), the sockets (each `authed` or not) and
  every frame a client sent (`received`), each with its `at`. A fresh one per side.
- bare: `echo_client`, trio + trio_websocket + httpx: the socket opened and its
  `authentication_challenge` answered OK; for each `posted` event of another user a
  task of its own posts `POST /api/v4/posts` (the channel, "You said: " + message)
  with the bot's token, so posts run concurrently with the socket's reading.
- hermes: its Mattermost adapter on the same socket (after its start's catch-up, an
  empty one). Per post it commits the journal with the post's time (the catch-up's
  cursor), runs the turn, and posts the reply from the outbox (Markdown as it is).
- A reply is matched to its message by its text (each carries a unique marker);
  checked besides: every reply a top-level post (DMs are not answered in threads),
  and no socket opened but the first (a reconnect would mean a missed deadline).
- `where` splits hermes's latency at its `user_typing` action on the socket: inject
  -> typing (the event pushed, the journal commit) and typing -> reply (the turn, the
  outbox row, the pacing, the post). hermes shows "typing" only for a turn still
  running `typing_after` (0.3 s) after its post was admitted, so with the offline
  model's instant turns it sends none and the split is not printed.
- The pace (hermes/delivery/outbox.py PACES): Mattermost's default rate limit is 10
  requests a second per user (RateLimitSettings.PerSec, burst 100), which a bot's
  posts share; hermes paces its posts at 8/s (burst 20). The default 8/s over 50 DMs
  is under the server's limit and at hermes's pace. At 8/s the 1,000 messages would
  take two minutes a side: 500 are offered.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio
from chat import Fake, Injected, Platform, Side
from trio_websocket import open_websocket_url

from tests.fakes.mattermost import BOT_ID, BOT_TOKEN

TOKEN_ENV = "MATTERMOST_TOKEN"


async def echo_client(url: str) -> None:
    """The socket authenticated; each other user's post answered by a task of its own
    posting on a client of its own. Runs until cancelled."""
    headers = {"authorization": f"Bearer {BOT_TOKEN}"}
    socket = url.replace("http", "ws", 1) + "/api/v4/websocket"
    async with (
        httpx.AsyncClient(timeout=30, headers=headers) as poster,
        trio.open_nursery() as nursery,
        open_websocket_url(socket) as ws,
    ):

        async def answer(post: dict[str, Any]) -> None:
            reply = {"channel_id": post["channel_id"], "message": "You said: " + post["message"]}
            response = await poster.post(f"{url}/api/v4/posts", json=reply)
            if response.status_code != 201:
                raise RuntimeError(f"POST posts refused: {response.text!r}")

        challenge = {"seq": 1, "action": "authentication_challenge", "data": {"token": BOT_TOKEN}}
        await ws.send_message(json.dumps(challenge))
        while True:
            frame = json.loads(await ws.get_message())
            if frame.get("seq_reply") == 1 and frame.get("status") != "OK":
                raise RuntimeError(f"the socket refused the token: {frame!r}")
            if frame.get("event") == "posted":
                post = json.loads(frame["data"]["post"])
                if post.get("user_id") != BOT_ID:
                    nursery.start_soon(answer, post)


class Mattermost(Platform):
    name = "mattermost"
    fake = "Mattermost (API v4, its WebSocket)"
    rate = 8.0
    count = 500
    client = "trio + trio_websocket + httpx echo client"
    chat_field = "channel_id"
    split = ("typed before their reply", "inject -> typing (pushed, admitted)",
             "typing -> reply (turn, outbox, pace, post)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  mattermost:\n    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
                "    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: BOT_TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        return f"u{i}", f"dm-u{i}"

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        """Until a socket is authenticated: a post before it reaches no socket."""
        while True:
            if any(s["authed"] and s["open"] for s in (await fake.state(http))["sockets"]):
                return
            await trio.sleep(0.05)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"text": injected.text, "user": injected.user, "channel": injected.chat}
        return str(await fake.inject(http, "message", kwargs))

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """By the reply's text."""
        return {"You said: " + injected.text: n for n, injected in enumerate(side.injected)}

    def answers(self, post: dict[str, Any]) -> Any:
        return self.text(post)

    def text(self, post: dict[str, Any]) -> str:
        return str(post.get("message", ""))

    def check(self, side: Side, state: dict[str, Any]) -> None:
        threaded = [s["id"] for s in state["sent"] if s["root_id"]]
        if threaded:
            side.problems.append(f"{len(threaded)} replies in a thread: {threaded[:3]}")
        if len(state["sockets"]) != 1:
            side.problems.append(f"{len(state['sockets'])} sockets opened (a reconnect)")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        frames = len(state["received"]) - len(before["received"])
        return f"{frames} frames from the client, {len(state['catchups'])} catch-up reads"

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """When the client said it was typing, by channel."""
        typing: dict[Any, list[float]] = {}
        for record in state["received"]:
            frame = record["frame"]
            if isinstance(frame, dict) and frame.get("action") == "user_typing":
                typing.setdefault(frame["data"]["channel_id"], []).append(record["at"])
        return typing

    def mark_key(self, injected: Injected) -> Any:
        return injected.chat


PLATFORM = Mattermost()
