"""WhatsApp for bench/chat.py: the fake Cloud API and a bare webhook echo client.

Run: python bench/chat.py whatsapp [--rate R]   (about four minutes)
- The fake (tests/fakes/whatsapp.py: the Graph API, and a driver POSTing signed webhook
  deliveries to its `webhook_url`): `_fake/deliver_text` makes a user (wa_id WA_ID + i,
  their chat the same) write a text, queued for delivery at once, and answers its
  wamid; its state lists the sends (`sent`), the mark-as-read calls (`reads`) and the
  delivery attempts (`deliveries`: the messages and the status callbacks, sent and
  delivered, of each send), each with its `at`. The driver posts one user's
  deliveries one at a time, different users' in parallel (on 4 threads).
- bare: `echo_client`, a trio webhook server (hypercorn's Trio worker, as serve's
  listener, with a tiny ASGI app): it verifies X-Hub-Signature-256 (the HMAC-SHA256 of
  the raw body under the app secret, in constant time), answers 200 (403 unsigned),
  and for each text message starts a task posting `POST {graph}/{phone_number_id}/
  messages` ("You said: " + text, `context.message_id` the message's wamid) with the
  Bearer token on a client of its own. Its webhook URL, which one sets in Meta's
  dashboard, it gives the fake itself (`_fake/configure`) once it listens.
- hermes: serve's webhook listener on a free port (`gateway.webhooks.port: 0`); once
  serve is ready the fake delivers to it (the port from HERMES_HOME/webhooks.port).
  Per delivery its adapter checks the signature and commits the journal (and the
  user's 24-hour window) before the 200, then marks the message read with the
  typing indicator; the turn runs and the outbox sends the reply (with `context`).
- A reply is matched to its message by `context.message_id` (the wamid). Checked
  besides: every delivery acknowledged at its first attempt (a retry means an answer
  other than 2xx), none given up, no send failed afterwards (a `failed` status), no
  message marked read twice.
- `where` splits hermes's latency at the mark-as-read the fake records: inject -> read
  (the delivery, the signature, the journal commit) and read -> reply (the turn, the
  outbox row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): 80 messages/s overall, and the pair
  rate, about one message every 6 s to a user (burst 5). The default 5/s over 50
  users is one message every 10 s to each, under it; above 50 / 6 = 8.3/s a user
  writes faster than hermes may answer them for long. At 5/s the bench's 1,000
  messages would take 200 s a side: 500 (100 s a side, 10 to each user) keep a run
  to about four minutes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from typing import Any

import httpx
import trio
from chat import Answer, Fake, Injected, Pushed, Side, first_times, not_2xx, serve_webhook

from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN

TOKEN_ENV, SECRET_ENV, VERIFY_ENV = "WHATSAPP_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"
WA_ID = 491510000000  # user i is WA_ID + i
VERSION = "v21.0"  # the Graph API's, in the URL (the fake serves any)


def graph(fake_url: str) -> str:
    return f"{fake_url}/{VERSION}"


def texts(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The text messages of a webhook delivery."""
    return [message
            for entry in payload.get("entry", ())
            for change in entry.get("changes", ())
            for message in change.get("value", {}).get("messages", ())
            if message.get("type") == "text"]  # fmt: skip


async def echo_client(url: str) -> None:
    """A webhook server on a free port, given to the fake; each signed delivery answered
    200, each text message in it answered by a task of its own posting on a client of
    its own. Runs until cancelled."""
    headers = {"authorization": f"Bearer {TOKEN}"}
    messages_url = f"{graph(url)}/{PHONE_NUMBER_ID}/messages"
    async with (
        httpx.AsyncClient(timeout=30, headers=headers) as sender,
        trio.open_nursery() as nursery,
    ):

        async def answer(message: dict[str, Any]) -> None:
            body = {"messaging_product": "whatsapp", "to": message["from"], "type": "text",
                    "text": {"body": "You said: " + message["text"]["body"]},
                    "context": {"message_id": message["id"]}}  # fmt: skip
            response = await sender.post(messages_url, json=body)
            if response.status_code != 200:
                raise RuntimeError(f"the send was refused: {response.text}")

        def delivered(headers: dict[bytes, bytes], query: bytes, body: bytes) -> Answer:
            given = headers.get(b"x-hub-signature-256", b"")
            expected = hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
            status = 200 if hmac.compare_digest(given, b"sha256=" + expected.encode()) else 403
            if status == 200:
                for message in texts(json.loads(body)):
                    nursery.start_soon(answer, message)
            return status, [], b""

        await serve_webhook(nursery, url, "/webhook", delivered)


class WhatsApp(Pushed):
    name = "whatsapp"
    fake = "WhatsApp Cloud API (Graph API, webhook deliveries)"
    rate = 5.0  # one message every 10 s to each of 50 users: under the ~1/6 s pair rate
    count = 500  # 100 s a side at 5/s
    client = "trio + hypercorn + httpx webhook echo client"
    chat_field = "to"
    split = ("marked read", "inject -> read (delivery, signature, journal commit)",
             "read -> reply (turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  whatsapp:\n    token_env: {TOKEN_ENV}\n    app_secret_env: {SECRET_ENV}\n"
                f"    verify_token_env: {VERIFY_ENV}\n    base_url: '{graph(fake_url)}'\n"
                f"    phone_number_id: '{PHONE_NUMBER_ID}'\n"
                "    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: TOKEN, SECRET_ENV: APP_SECRET, VERIFY_ENV: VERIFY_TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        return str(WA_ID + i), str(WA_ID + i)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"wa_id": injected.user, "text": injected.text, "name": f"User{injected.user}"}
        return str(await fake.inject(http, "deliver_text", kwargs))

    def answers(self, post: dict[str, Any]) -> Any:
        return post.get("reply_to")

    def text(self, post: dict[str, Any]) -> str:
        return str(post.get("text"))

    def check(self, side: Side, state: dict[str, Any]) -> None:
        super().check(side, state)
        if state["gave_up"]:
            side.problems.append(f"{len(state['gave_up'])} deliveries given up")
        failed = [s for s in state["sent"] if s["error_code"] is not None]
        if failed:
            side.problems.append(f"{len(failed)} sends failed afterwards: {failed[:1]!r:.300}")
        twice = [m for m, n in Counter(r["message_id"] for r in state["reads"]).items() if n > 1]
        if twice:
            side.problems.append(f"{len(twice)} messages marked read more than once")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        kinds = Counter(d["kind"] for d in state["deliveries"][len(before["deliveries"]) :])
        reads = len(state["reads"]) - len(before["reads"])
        statuses = sum(n for kind, n in kinds.items() if kind != "message")
        return (f"{kinds['message']} message deliveries, {statuses} status callbacks, "
                f"{len(not_2xx(state))} not answered 2xx; {reads} marked read")  # fmt: skip

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """Each message's mark-as-read, by its wamid."""
        return first_times(state["reads"], "message_id")


PLATFORM = WhatsApp()
