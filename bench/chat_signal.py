"""Signal for bench/chat.py: the fake signal-cli daemon and a bare event-stream echo client.

Run: python bench/chat.py signal [--rate R]   (about three minutes)
- The fake (tests/fakes/signal.py: the daemon's JSON-RPC over HTTP and its Server-Sent
  Events, receive mode on-connection), keep-alives every KEEPALIVE s. `_fake/message`
  makes a user (number +1555100<i>) write to the account and answers the envelope; its
  state lists the sends (`sent`), the events written to a stream (`delivered`) and the
  typing indicators, each with its `at`. The bench waits for an open stream before the
  warm-up (a message before it would wait on "Signal's servers", which is no loss but
  not what is measured).
- bare: `echo_client`, trio + httpx: `GET /api/v1/events` for the account; for each data
  message a task POSTs `send` to `/api/v1/rpc` ("You said: " + text, quoting it), on a
  client of its own.
- hermes: its Signal adapter on the same stream. Per message it commits the journal
  (with the event's id), runs the turn, sends the typing indicator, and sends the reply
  from the outbox (quoting the message, its Markdown as text styles).
- A reply is matched to its message by its quote's timestamp. Checked besides: every
  message written to the stream once (no replay).
- `where` splits the latency at the event the fake records as written to the stream:
  inject -> written (the fake's own work) and written -> reply (the client: for hermes
  the admission, the turn, the outbox row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): 5 messages a second overall (burst 5) and
  1 a second to a chat: the default 4/s over 50 users is under it. At 4/s, 300 messages
  are offered (75 s a side).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import trio
from chat import Fake, Injected, Platform, Side, first_times

from tests.fakes.signal import ACCOUNT

KEEPALIVE = 5.0  # seconds, the fake's keep-alives (signal-cli's 15)


async def echo_client(url: str) -> None:
    """The event stream read; each data message answered by a task of its own posting
    `send` with a client of its own. Runs until cancelled."""
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None)) as reader,
        httpx.AsyncClient(timeout=30) as sender,
        trio.open_nursery() as nursery,
    ):
        calls = iter(range(1, 1 << 62))

        async def answer(envelope: dict[str, Any]) -> None:
            data = envelope["dataMessage"]
            params = {"account": ACCOUNT, "recipient": [envelope["sourceNumber"]],
                      "message": "You said: " + data["message"],
                      "quoteTimestamp": envelope["timestamp"],
                      "quoteAuthor": envelope["sourceNumber"]}  # fmt: skip
            body = {"jsonrpc": "2.0", "method": "send", "params": params, "id": next(calls)}
            response = await sender.post(f"{url}/api/v1/rpc", json=body)
            if response.status_code != 200 or "error" in response.json():
                raise RuntimeError(f"send refused: {response.text!r}")

        params = {"account": ACCOUNT}
        async with reader.stream("GET", f"{url}/api/v1/events", params=params) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data:"):
                    continue  # ids, event names, keep-alives, blank lines
                envelope = json.loads(line.removeprefix("data:"))["envelope"]
                if isinstance(envelope.get("dataMessage"), dict):
                    nursery.start_soon(answer, envelope)


class Signal(Platform):
    name = "signal"
    fake = f"signal-cli daemon (JSON-RPC over HTTP, its event stream; keep-alive {KEEPALIVE:g} s)"
    fake_args = ("--keepalive", str(KEEPALIVE))
    rate = 4.0
    count = 300
    client = "trio + httpx event-stream echo client"
    chat_field = "recipients"
    split = ("written to the stream before their reply", "inject -> event written (the fake)",
             "written -> reply (admission, turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  signal:\n    rpc: '{fake_url}'\n    account: '{ACCOUNT}'\n"
                f"    keepalive: {KEEPALIVE}\n    allow_all_users: true\n")  # fmt: skip
        return yaml, {}

    def who(self, i: int) -> tuple[str, list[str]]:
        number = f"+1555100{i:04d}"
        return number, [number]  # a reply's chat is its recipients

    async def ready(self, http: httpx.AsyncClient, fake: Fake) -> None:
        while True:  # the client is reading the stream: injections reach it at once
            if (await fake.state(http))["open_streams"]:
                return
            await trio.sleep(0.05)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> int:
        kwargs = {"source": injected.user, "text": injected.text}
        return (await fake.inject(http, "message", kwargs))["timestamp"]

    def answers(self, post: dict[str, Any]) -> Any:
        return post.get("quote_timestamp")

    def text(self, post: dict[str, Any]) -> str:
        return post.get("message")

    def check(self, side: Side, state: dict[str, Any]) -> None:
        written = Counter(d["timestamp"] for d in state["delivered"] if not d["replay"])
        twice = [ts for ts, n in written.items() if n > 1]
        if twice:
            side.problems.append(f"{len(twice)} messages written to the stream twice")

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        written = len(state["delivered"]) - len(before["delivered"])
        typing = len(state["typing_sent"]) - len(before["typing_sent"])
        return f"{written} events written, {typing} typing indicators"

    def marks(self, state: dict[str, Any], before: dict[str, Any]) -> dict[Any, list[float]]:
        """Each message's event as written to the stream."""
        return first_times(state["delivered"], "timestamp")


PLATFORM = Signal()
