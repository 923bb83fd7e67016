"""Telegram for bench/chat.py: the fake Bot API and a bare getUpdates echo bot.

Run: python bench/chat.py telegram [--rate R]
- The fake (tests/fakes/telegram.py, `--token`): `_fake/message` injects a user's
  message in their private chat (user and chat 5000 + i) and answers its update's id;
  its state lists the sends (`sent`), the getUpdates calls (`polls`) and the chat
  actions (`actions`), each with its `at`. A fresh one per side: one poller per
  token, and each side's message ids start from 1.
- bare: `echo_bot`, trio + httpx: a getUpdates long-poll loop (held POLL_TIMEOUT s;
  the offset one past the last update_id seen, which confirms the batch with the
  next poll), and for each text message a task sending `sendMessage(chat_id, "You
  said: " + text)` replying to it (`reply_parameters.message_id`), on a client of
  its own, so sends run concurrently with the next poll.
- hermes: its Telegram adapter polls the same way (`poll_timeout` POLL_TIMEOUT).
  Per update it commits the journal and the cursor, sends the typing indicator
  (sendChatAction), runs the turn, and sends the reply from the outbox in
  MarkdownV2 (which the fake parses back for the check).
- A reply is matched to its message by `reply_parameters.message_id` (the fake
  numbers injected and sent messages from one counter, so the injected ids are
  those its sends did not take).
- `where` splits hermes's latency at its typing action: inject -> typing (the held
  poll answering, the journal commit) and typing -> reply (the turn, the outbox row,
  the pacing, the send). hermes shows "typing" only for a turn still running
  `typing_after` (0.3 s) after its update was admitted, so with the offline model's
  instant turns it sends none and the split is not printed.
- The pace (hermes/delivery/outbox.py PACES): 30 messages/s overall, 1/s per chat.
  The default 25/s is below it; `--rate 50` is above it: hermes then sends 30/s,
  its backlog grows by 20/s and its latency with it, to seconds (warned; by
  design, not a stall).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import httpx
import trio
from chat import Fake, Injected, Platform, Side

from tests.fakes.telegram import parse_markdown_v2

TOKEN = "123456:BENCH-token"
TOKEN_ENV = "BENCH_TELEGRAM_TOKEN"
POLL_TIMEOUT = 10  # seconds a getUpdates is held, both sides


async def echo_bot(api: str) -> None:
    """getUpdates from an offset one past the last update seen; each text message
    answered by its own task on a client of its own, concurrently with the next poll.
    Runs until cancelled."""
    poll_timeout = httpx.Timeout(30, read=POLL_TIMEOUT + 15)
    async with (
        httpx.AsyncClient(timeout=poll_timeout) as poller,
        httpx.AsyncClient(timeout=30) as sender,
        trio.open_nursery() as nursery,
    ):

        async def answer(message: dict[str, Any]) -> None:
            params = {"chat_id": message["chat"]["id"], "text": "You said: " + message["text"],
                      "reply_parameters": {"message_id": message["message_id"]}}  # fmt: skip
            body = (await sender.post(f"{api}/sendMessage", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"sendMessage refused: {body!r}")

        offset = 0
        while True:
            params = {"offset": offset, "timeout": POLL_TIMEOUT, "allowed_updates": ["message"]}
            body = (await poller.post(f"{api}/getUpdates", json=params)).json()
            if not body.get("ok"):
                raise RuntimeError(f"getUpdates refused: {body!r}")
            for update in body["result"]:
                offset = max(offset, update["update_id"] + 1)
                message = update.get("message")
                if message and "text" in message:
                    nursery.start_soon(answer, message)


class Telegram(Platform):
    name = "telegram"
    fake = "Telegram Bot API"
    fake_args = ("--token", TOKEN)
    rate = 25.0  # below Telegram's 30/s
    client = "trio + httpx echo bot"
    chat_field = "chat_id"
    split = ("with a typing action", "inject -> typing sent (poll, admission)",
             "typing -> reply (turn, outbox, pace, send)")  # fmt: skip

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  telegram:\n    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
                f"    poll_timeout: {POLL_TIMEOUT}\n    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: TOKEN}

    def client_url(self, fake_url: str) -> str:
        return f"{fake_url}/bot{TOKEN}"

    echo_client = staticmethod(echo_bot)

    def who(self, i: int) -> tuple[int, int]:
        return 5000 + i, 5000 + i

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> int:
        user = injected.user
        kwargs = {"text": injected.text, "user_id": user, "username": f"user{user}",
                  "first_name": f"User{user}"}  # fmt: skip
        return int(await fake.inject(http, "message", kwargs))

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """By message id: the ids the fake's sends did not take, in order."""
        taken = {s["message_id"] for s in state["sent"]}
        ids = [i for i in range(1, len(side.injected) + len(state["sent"]) + 1) if i not in taken]
        if len(ids) != len(side.injected):
            raise RuntimeError(f"{len(ids)} message ids for {len(side.injected)} injections")
        return {message_id: n for n, message_id in enumerate(ids)}

    def answers(self, post: dict[str, Any]) -> Any:
        return (post.get("reply_parameters") or {}).get("message_id")

    def text(self, post: dict[str, Any]) -> str:
        if post.get("parse_mode") == "MarkdownV2":
            return parse_markdown_v2(post["text"])
        return post["text"]

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        polls = state["polls"] - before["polls"]
        actions = len(state["actions"]) - len(before["actions"])
        return (f"{polls} getUpdates ({len(side.timed) / max(polls, 1):.2f} messages per poll), "
                f"{actions} sendChatAction")  # fmt: skip

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """The typing actions of the timed phase, by chat."""
        actions: dict[Any, list[float]] = defaultdict(list)
        for action in state["actions"][len(before["actions"]) :]:
            actions[action["chat_id"]].append(action["at"])
        return actions

    def mark_key(self, injected: Injected) -> Any:
        return injected.chat


PLATFORM = Telegram()
