"""iMessage for bench/chat.py: the fake BlueBubbles server and a bare webhook echo client.

Run: python bench/chat.py imessage [--rate R]   (about three minutes)
- The fake (tests/fakes/bluebubbles.py: the REST API with its password, and a driver
  POSTing `new-message` events to its `webhook_url`): `_fake/message` makes user
  +1555100<i> write a text in their DM (`iMessage;-;+1555100<i>`), delivered at once
  from a thread of its own (one chat's in order), and answers the message's guid; a
  message sent through the API is delivered back as the server does (`isFromMe`). Its
  state lists the sends (`sent`), every delivery (`deliveries`) and every message query
  (`queries`), each with its `at`.
- bare: `echo_client`, a trio webhook server (hypercorn's Trio worker, as serve's
  listener, with a tiny ASGI app): one message query at its start (what a real client
  catches up with), then the fake's webhook pointed at it with a token; each request's
  token compared, answered 200 (401 without it), and for each user's new-message a task
  posts `POST /api/v1/message/text` (the chat, a fresh tempGuid, "You said: " + text)
  with the password, on a client of its own.
- hermes: serve's webhook listener on a free port (`gateway.webhooks.port: 0`), the
  fake's webhook pointed at it once serve is ready. Per message its adapter checks the
  token and commits the journal with the message's date (the catch-up's cursor) before
  the 200; the turn runs and the outbox sends the reply with its tempGuid.
- A reply is matched to its message by its text (each carries a unique marker). Checked
  besides: every delivery of a user's message answered 200, and every send carrying a
  tempGuid.
- `where` splits hermes's latency at the delivery's 200, as the fake records it: inject ->
  200 (the delivery, the token, the journal commit) and 200 -> reply (the turn, the
  outbox row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): 10 sends a second overall and 1 a second
  per chat (bursts of 3): Messages.app sends one at a time, and Apple flags bulk
  senders. The default 8/s over 50 users is one message every 6.25 s to each: under
  both. At 8/s the 1,000 messages would take two minutes a side: 500 are offered.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import trio
from chat import Answer, Fake, Injected, Pushed, Side, serve_webhook

from tests.fakes.bluebubbles import PASSWORD, dm

PASSWORD_ENV = "BLUEBUBBLES_PASSWORD"
WEBHOOK_ENV = "IMESSAGE_WEBHOOK_TOKEN"
TOKEN = "bench-webhook-token"


async def echo_client(url: str) -> None:
    """A webhook server on a free port, given to the fake; each user's new message answered
    by a task of its own. Runs until cancelled."""
    params = {"password": PASSWORD}
    async with httpx.AsyncClient(timeout=30) as http, trio.open_nursery() as nursery:
        caught = await http.post(f"{url}/api/v1/message/query", params=params,
                                 json={"after": 0, "sort": "ASC", "limit": 100})  # fmt: skip
        if caught.status_code != 200:
            raise RuntimeError(f"the catch-up was refused: {caught.text}")

        async def answer(message: dict[str, Any]) -> None:
            chat, text = message["chats"][0]["guid"], "You said: " + message["text"]
            body = {"chatGuid": chat, "tempGuid": str(uuid.uuid4()), "message": text}
            response = await http.post(f"{url}/api/v1/message/text", params=params, json=body)
            if response.status_code != 200:
                raise RuntimeError(f"the send was refused: {response.text}")

        def delivered(headers: dict[bytes, bytes], query: bytes, body: bytes) -> Answer:
            status = 200 if query == f"token={TOKEN}".encode() else 401
            event = json.loads(body)
            message = event.get("data") or {}
            if status == 200 and event.get("type") == "new-message" and not message["isFromMe"]:
                nursery.start_soon(answer, message)
            return status, [], b""

        await serve_webhook(nursery, url, f"/hook?token={TOKEN}", delivered)


class IMessage(Pushed):
    name = "imessage"
    fake_module = "bluebubbles"
    fake = "BlueBubbles (REST with its password, webhook deliveries with a token)"
    rate = 8.0
    count = 500
    client = "trio + hypercorn + httpx webhook echo client"
    chat_field = "chatGuid"
    hook_query = f"?token={TOKEN}"
    delivery_id = "guid"
    split = ("answered 200", "inject -> 200 (delivery, token, journal commit)",
             "200 -> reply (turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  imessage:\n    token_env: {PASSWORD_ENV}\n"
                f"    webhook_token_env: {WEBHOOK_ENV}\n    base_url: '{fake_url}'\n"
                "    allow_all_users: true\n")  # fmt: skip
        return yaml, {PASSWORD_ENV: PASSWORD, WEBHOOK_ENV: TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        user = f"+1555100{i:04d}"
        return user, dm(user)

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        """Until the client caught up and the fake has its webhook (hermes's adapter
        answers the listener only once it is connected: its first catch-up)."""
        while True:
            state = await fake.state(http)
            if state["webhook_url"] and state["queries"]:
                return
            await trio.sleep(0.05)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"text": injected.text, "user": injected.user}
        return str(await fake.inject(http, "message", kwargs))

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """By the reply's text."""
        return {"You said: " + injected.text: n for n, injected in enumerate(side.injected)}

    def answers(self, post: dict[str, Any]) -> Any:
        return self.text(post)

    def text(self, post: dict[str, Any]) -> str:
        return str(post.get("message", ""))

    def check(self, side: Side, state: dict[str, Any]) -> None:
        super().check(side, state)
        if any(not s["tempGuid"] for s in state["sent"]):
            side.problems.append("a send without a tempGuid")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        delivered = len(state["deliveries"]) - len(before["deliveries"])
        queries = len(state["queries"]) - len(before["queries"])
        return f"{delivered} webhook deliveries (the sends' echoes too), {queries} queries"


PLATFORM = IMessage()
