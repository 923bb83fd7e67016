"""Discord for bench/chat.py: the fake Discord and a bare Gateway echo client.

Run: python bench/chat.py discord [--rate R]
- The fake (tests/fakes/discord.py: the REST API v10 and the Gateway on one port),
  with a heartbeat interval of HEARTBEAT s (Discord's 41.25 s would see none in a
  run), so heartbeats go on under load (the longest gap between two is printed; over
  1.5 intervals is reported). `_fake/message` injects a user's DM (author 1000 + i in
  channel 2000 + i; a MESSAGE_CREATE with no guild_id, dispatched on the current
  Gateway session) and answers the message's id; its state lists the messages
  created (`sent`), the dispatches written to the socket and the typing triggers,
  each with its `at`. The bench waits for a Gateway session before the warm-up (an
  injection before it would be lost).
- bare: `echo_client`, trio + trio_websocket + httpx: GET /gateway/bot with the bot
  token, the returned URL opened (`?v=10&encoding=json`), Hello awaited, a heartbeat
  task (op 1 every heartbeat_interval), Identify (op 2); for each MESSAGE_CREATE from
  a non-bot author a task posting `POST /channels/{id}/messages` ("You said: " +
  content, message_reference to the message), so posts run concurrently with the
  socket's reading.
- hermes: its Discord adapter on the Gateway. Per event it commits the journal,
  runs the turn, posts the typing trigger for a DM, and sends the reply from the
  outbox (with message_reference).
- A reply is matched to its message by its message_reference.message_id. Checked
  besides: every message dispatched (not replayed) exactly once, none lost, one
  identify, no resume, one connection, the heartbeats on time.
- `where` splits the latency at the dispatch the fake records as written to the
  socket: inject -> dispatched (the fake's own work) and dispatched -> reply (the
  client: for hermes the admission, the turn, the outbox row, the pacing, the post).
  The fake stamps a dispatch after its socket write returns: a fast client's reply
  is sometimes recorded first (those are left out of it).
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

from tests.fakes.discord import TOKEN

TOKEN_ENV = "DISCORD_BOT_TOKEN"
HEARTBEAT = 1.0  # seconds, the fake's Hello (Discord: 41.25 s, none in a run)
INTENTS = 37376  # GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT


async def echo_client(url: str) -> None:
    """GET /gateway/bot, the socket opened, Hello awaited, heartbeats from a task,
    Identify; each MESSAGE_CREATE from a non-bot author answered by a task of its own
    posting with a client of its own. Runs until cancelled."""
    headers = {"authorization": f"Bot {TOKEN}"}
    api = f"{url}/api/v10"
    async with (
        httpx.AsyncClient(timeout=30, headers=headers) as opener,
        httpx.AsyncClient(timeout=30, headers=headers) as poster,
        trio.open_nursery() as nursery,
    ):
        seq: list[int | None] = [None]

        async def answer(message: dict[str, Any]) -> None:
            body = {"content": "You said: " + message["content"],
                    "message_reference": {"message_id": message["id"]}}  # fmt: skip
            channel = message["channel_id"]
            response = await poster.post(f"{api}/channels/{channel}/messages", json=body)
            if response.status_code != 200:
                raise RuntimeError(f"create message refused: {response.text!r}")

        async def heartbeat(ws: Any, interval: float) -> None:
            while True:
                await trio.sleep(interval)
                await ws.send_message(json.dumps({"op": 1, "d": seq[0]}))

        response = await opener.get(f"{api}/gateway/bot")
        if response.status_code != 200:
            raise RuntimeError(f"gateway/bot refused: {response.text!r}")
        async with open_websocket_url(response.json()["url"] + "?v=10&encoding=json") as ws:
            hello = json.loads(await ws.get_message())
            if hello.get("op") != 10:
                raise RuntimeError(f"the socket began with {hello!r}")
            nursery.start_soon(heartbeat, ws, hello["d"]["heartbeat_interval"] / 1000)
            properties = {"os": "linux", "browser": "bench", "device": "bench"}
            identify = {"token": TOKEN, "intents": INTENTS, "properties": properties}
            await ws.send_message(json.dumps({"op": 2, "d": identify}))
            while True:
                frame = json.loads(await ws.get_message())
                if frame.get("s") is not None:
                    seq[0] = frame["s"]
                if frame.get("op") != 0 or frame.get("t") != "MESSAGE_CREATE":
                    continue  # READY, heartbeat acks
                message = frame["d"]
                if not message.get("author", {}).get("bot"):
                    nursery.start_soon(answer, message)


def beat_gap(state: dict[str, Any]) -> float:
    """The longest gap between two heartbeats, seconds."""
    beats = [h["at"] for h in state["heartbeats"]]
    return max((b - a for a, b in zip(beats, beats[1:], strict=False)), default=0.0)


def created(state: dict[str, Any]) -> int:
    """MESSAGE_CREATEs written to the socket."""
    return sum(1 for d in state["dispatches"] if d["t"] == "MESSAGE_CREATE")


class Discord(Platform):
    name = "discord"
    fake = f"Discord (REST v10, Gateway; heartbeat {HEARTBEAT:g} s)"
    fake_args = ("--heartbeat-interval", str(HEARTBEAT))
    client = "trio + trio_websocket + httpx echo client"
    chat_field = "channel_id"
    split = ("dispatched before their reply", "inject -> dispatch written (the fake)",
             "dispatch -> reply (admission, turn, outbox, pace, post)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  discord:\n    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
                "    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        return str(1000 + i), str(2000 + i)

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        while True:  # the client identifies: injections before are lost
            if (await fake.state(http))["sessions"]:
                return
            await trio.sleep(0.05)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"content": injected.text, "author_id": injected.user,
                  "channel_id": injected.chat}  # fmt: skip
        return str(await fake.inject(http, "message", kwargs))

    def answers(self, post: dict[str, Any]) -> Any:
        return str((post.get("message_reference") or {}).get("message_id"))

    def text(self, post: dict[str, Any]) -> str:
        return post.get("content")

    def check(self, side: Side, state: dict[str, Any]) -> None:
        dispatched = Counter(d["id"] for d in state["dispatches"]
                             if d["t"] == "MESSAGE_CREATE" and not d["replay"])  # fmt: skip
        undispatched = [(n, dispatched[injected.id]) for n, injected in enumerate(side.injected)
                        if dispatched[injected.id] != 1]  # fmt: skip
        if undispatched:
            side.problems.append(f"{len(undispatched)} messages not dispatched exactly once "
                                 f"(message, times): {undispatched[:5]}")  # fmt: skip
        if state["lost"]:
            side.problems.append(f"{len(state['lost'])} events lost (no valid session)")
        if state["identifies"] != 1 or state["resumes"] or state["connections"] != 1:
            side.problems.append(f"{state['identifies']} identifies, {state['resumes']} "
                                 f"resumes, {state['connections']} connections (1, 0, 1 "
                                 "expected)")  # fmt: skip
        if beat_gap(state) > 1.5 * HEARTBEAT:
            side.problems.append(f"heartbeats {beat_gap(state):.2f} s apart at most (every "
                                 f"{HEARTBEAT:g} s expected): the client's loop "
                                 "stalled")  # fmt: skip

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        typing = len(state["typing"]) - len(before["typing"])
        return (f"{created(state) - created(before)} dispatches, {typing} typing triggers, "
                f"{len(state['heartbeats'])} heartbeats (at most {beat_gap(state):.2f} s "
                "apart)")  # fmt: skip

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """Each message's first dispatch written to the socket."""
        return first_times(state["dispatches"], "id")


PLATFORM = Discord()
