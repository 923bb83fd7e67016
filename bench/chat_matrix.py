"""Matrix for bench/chat.py: the fake homeserver and a bare /sync echo client.

Run: python bench/chat.py matrix [--rate R]   (about three minutes)
- The fake (tests/fakes/matrix.py: the client-server API). Before a side's warm-up the
  bench makes its users (`_fake/add_user`: @user<i>:test.local) and a DM room each with
  the bot (`_fake/create_room`, room `!dm<i>:test.local`, in the clear: the bench
  measures the transport and hermes's handling; encryption is the tests'), then waits
  for the bot's first sync to be answered (what comes before it is history, never
  answered). `_fake/message` makes a user write in their room and answers the event;
  its state lists the sends (`sent`), the syncs and the typing notices, each with its
  `at`.
- bare: `echo_client`, trio + httpx: `/sync` long polls with the bot's token from the
  last `next_batch` (the first one only marks where it begins); for each
  `m.room.message` of another user a task PUTs `m.room.message` ("You said: " + body,
  `m.in_reply_to` the event) under a transaction id of its own, on a client of its own.
- hermes: its Matrix adapter on the same /sync. Per event it commits the journal (with
  the batch's token), runs the turn, sends a typing notice, and sends the reply from
  the outbox (a transaction id from the row, `m.in_reply_to`, the HTML beside it).
- A reply is matched to its message by `m.in_reply_to`. Checked besides: no message
  sent twice under one transaction id, and no sync refused.
- `where` splits the latency at the bot's next sync after the message, which a client
  starts once it has taken the batch that brought it: inject -> next sync (the long poll
  woken, the batch read; for hermes, admitted and its token committed) and next sync ->
  reply (the client: for hermes the turn, the outbox row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): 10 messages a second overall (burst 10)
  and 2 a second a room: the default 8/s over 50 rooms is under it. At 8/s the 1,000
  messages would take two minutes a side: 500 are offered.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import httpx
import trio
from chat import USERS, Fake, Injected, Platform, Side

from tests.fakes.matrix import HERMES, HERMES_TOKEN

TOKEN_ENV = "MATRIX_TOKEN"
SERVER = "test.local"


def client_url(base: str, *parts: str) -> str:
    return f"{base}/_matrix/client/v3/" + "/".join(parts)


async def echo_client(url: str) -> None:
    """/sync long polls as the bot; each other user's message answered by a task of its
    own on a client of its own. Runs until cancelled."""
    headers = {"authorization": f"Bearer {HERMES_TOKEN}"}
    txns = itertools.count()
    async with (
        httpx.AsyncClient(timeout=60, headers=headers) as syncer,
        httpx.AsyncClient(timeout=30, headers=headers) as sender,
        trio.open_nursery() as nursery,
    ):

        async def answer(room: str, event: dict[str, Any]) -> None:
            quoted = {"m.in_reply_to": {"event_id": event["event_id"]}}
            body = "You said: " + event["content"]["body"]
            content = {"msgtype": "m.text", "body": body, "m.relates_to": quoted}
            path = client_url(url, "rooms", room, "send", "m.room.message", f"echo{next(txns)}")
            response = await sender.put(path, json=content)
            if response.status_code != 200:
                raise RuntimeError(f"send refused: {response.text!r}")

        since = None
        while True:
            params: dict[str, Any] = {"timeout": 30000}
            if since:
                params["since"] = since
            response = await syncer.get(client_url(url, "sync"), params=params)
            if response.status_code != 200:
                raise RuntimeError(f"sync refused: {response.text!r}")
            batch = response.json()
            if since is not None:
                for room, joined in batch.get("rooms", {}).get("join", {}).items():
                    for event in joined.get("timeline", {}).get("events", []):
                        if event.get("type") == "m.room.message" and event["sender"] != HERMES:
                            nursery.start_soon(answer, room, event)
            since = batch["next_batch"]


class Matrix(Platform):
    name = "matrix"
    fake = "Matrix (client-server API, /sync long polls)"
    rate = 8.0
    count = 500
    client = "trio + httpx /sync echo client"
    chat_field = "room"
    split = ("with a sync between them and their reply", "inject -> next sync (taken)",
             "next sync -> reply (turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  matrix:\n    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
                f"    user_id: '{HERMES}'\n    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: HERMES_TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        return f"@user{i}:{SERVER}", f"!dm{i}:{SERVER}"

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        for i in range(1, USERS + 1):  # a fresh fake each side
            user, room = self.who(i)
            await fake.inject(http, "add_user", {"user": user})
            members = {"members": [user, HERMES], "direct": True, "room_id": room}
            await fake.inject(http, "create_room", members)
        while True:  # the bot's first sync answered: later messages are news to it
            syncs = (await fake.state(http))["syncs"]
            if sum(1 for s in syncs if s["user"] == HERMES and s["next_batch"]) >= 1:
                return
            await trio.sleep(0.05)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"room": injected.chat, "sender": injected.user, "body": injected.text}
        return (await fake.inject(http, "message", kwargs))["event_id"]

    def answers(self, post: dict[str, Any]) -> Any:
        relation = post["content"].get("m.relates_to") or {}
        return (relation.get("m.in_reply_to") or {}).get("event_id")

    def text(self, post: dict[str, Any]) -> str:
        return post["content"].get("body")

    def check(self, side: Side, state: dict[str, Any]) -> None:
        mine = [s for s in state["sent"] if s["sender"] == HERMES]
        repeated = [t for t, n in Counter(s["txn_id"] for s in mine).items() if n > 1]
        if repeated:
            side.problems.append(f"{len(repeated)} transaction ids sent twice: {repeated[:3]}")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        syncs = len(state["syncs"]) - len(before["syncs"])
        typing = len(state["typing"]) - len(before["typing"])
        return f"{syncs} syncs, {typing} typing notices"

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """When the bot's syncs came (a message's mark: the first after it, the one that
        follows the batch that brought it)."""
        return {"syncs": sorted(s["at"] for s in state["syncs"] if s["user"] == HERMES)}

    def mark_key(self, injected: Injected) -> Any:
        return "syncs"


PLATFORM = Matrix()
