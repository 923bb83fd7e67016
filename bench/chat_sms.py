"""SMS through Twilio for bench/chat.py: the fake Twilio and a bare webhook echo client.

Run: python bench/chat.py sms [--rate R]   (about five minutes: SMS is slow by design)
- The fake (tests/fakes/twilio.py: the Messages API, and a driver POSTing signed forms to
  its `webhook_url`, signed over the public URL as through a reverse proxy):
  `_fake/message` makes a user (`+1555000<i>`) text hermes's number, delivered at once
  from a thread of its own (one sender's in order), and answers the MessageSid; its state
  lists the messages sent (`sent`), every delivery attempt (`deliveries`) and status
  callback (`callbacks`), each with its `at`.
- bare: `echo_client`, a trio webhook server (hypercorn's Trio worker, as serve's
  listener, with a tiny ASGI app): it checks each request's X-Twilio-Signature over the
  public URL as hermes does, answers 200 with the empty TwiML (403 unproven), and for each
  message starts a task posting "You said: <text>" to the Messages API (HTTP Basic, the
  account and its auth token), on a client of its own. It asks for no status callback.
- hermes: serve's webhook listener on a free port (`gateway.webhooks.port: 0`); once
  serve is ready the fake delivers to it. Per message its adapter checks the signature and
  commits the journal before the 200; the turn runs and the outbox sends the reply, with a
  StatusCallback: the fake posts `delivered` to it after each send (hermes's cost, not
  its latency).
- A reply is matched to its message by its text (SMS has no reply reference). Checked
  besides: every delivery answered 2xx at its first attempt, every status callback 200.
- `where` splits hermes's latency at the delivery's 200, as the fake records it: inject ->
  200 (the delivery, the signature, the journal commit) and 200 -> reply (the turn, the
  outbox row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): a long-code number's 1 message a second, in
  bursts of 10. The rate, 0.8 a second, is under it (the warm-up's 50 wait on it); 100
  timed messages, two minutes a side.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qsl

import httpx
import trio
from chat import Answer, Fake, Injected, Pushed, Side, not_2xx, serve_webhook

from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, NUMBER, PUBLIC_URL

TOKEN_ENV = "TWILIO_AUTH_TOKEN"
TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def proven(header: bytes, form: list[tuple[str, str]]) -> bool:
    """The request's X-Twilio-Signature is Twilio's over the public URL and the form."""
    signed = PUBLIC_URL + "".join(name + value for name, value in sorted(form))
    digest = hmac.new(AUTH_TOKEN.encode(), signed.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(header, base64.b64encode(digest))


async def echo_client(url: str) -> None:
    """A webhook server on a free port, given to the fake; each proven message answered
    200 and by a task of its own. Runs until cancelled."""
    messages_url = f"{url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
    async with (
        httpx.AsyncClient(timeout=30, auth=(ACCOUNT_SID, AUTH_TOKEN)) as sender,
        trio.open_nursery() as nursery,
    ):

        async def answer(form: dict[str, str]) -> None:
            reply = {"To": form["From"], "From": NUMBER, "Body": "You said: " + form["Body"]}
            response = await sender.post(messages_url, data=reply)
            if response.status_code != 201:
                raise RuntimeError(f"the send was refused: {response.text}")

        def delivered(headers: dict[bytes, bytes], query: bytes, body: bytes) -> Answer:
            form = parse_qsl(body.decode(), keep_blank_values=True)
            status = 200 if proven(headers.get(b"x-twilio-signature", b""), form) else 403
            if status == 200:
                nursery.start_soon(answer, dict(form))
            return status, [(b"content-type", b"text/xml")], TWIML

        await serve_webhook(nursery, url, "/sms", delivered)


class Sms(Pushed):
    name = "sms"
    fake = "Twilio (Messages API, signed webhook deliveries)"
    fake_module = "twilio"
    rate = 0.8  # under a long-code number's 1 message a second
    count = 100  # about two minutes a side
    client = "trio + hypercorn + httpx Twilio webhook echo client"
    chat_field = "to"
    split = ("answered 200", "inject -> 200 (delivery, signature, journal commit)",
             "200 -> reply (turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  sms:\n    account_sid: '{ACCOUNT_SID}'\n    number: '{NUMBER}'\n"
                f"    token_env: {TOKEN_ENV}\n    base_url: '{fake_url}'\n"
                f"    public_url: '{PUBLIC_URL}'\n    allow_all_users: true\n")  # fmt: skip
        return yaml, {TOKEN_ENV: AUTH_TOKEN}

    def who(self, i: int) -> tuple[str, str]:
        number = f"+1555000{i:04d}"
        return number, number

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        return str(await fake.inject(http, "message", {"text": injected.text,
                                                       "sender": injected.user}))  # fmt: skip

    def index(self, state: dict[str, Any], side: Side) -> dict[Any, int]:
        """By the reply's text."""
        return {"You said: " + injected.text: n for n, injected in enumerate(side.injected)}

    def answers(self, post: dict[str, Any]) -> Any:
        return self.text(post)

    def text(self, post: dict[str, Any]) -> str:
        return str(post.get("body", ""))

    def check(self, side: Side, state: dict[str, Any]) -> None:
        super().check(side, state)
        taken = {c["sid"] for c in state["callbacks"] if c.get("status_code") == 200}
        refused = {c["sid"] for c in state["callbacks"]} - taken
        if refused:
            side.problems.append(f"{len(refused)} status callbacks never answered 200")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        delivered = len(state["deliveries"]) - len(before["deliveries"])
        callbacks = len(state["callbacks"]) - len(before["callbacks"])
        return (
            f"{delivered} deliveries, {len(not_2xx(state))} not answered 2xx; {callbacks} callbacks"
        )


PLATFORM = Sms()
