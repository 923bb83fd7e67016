"""A fake chat platform on 127.0.0.1: a real HTTP server speaking a small
Telegram-like bot protocol (long polling for updates, a send call), for the
tests of platform adapters and of the gateway behind them.

The protocol (JSON bodies; every answer is `{"ok": true, ...}` or
`{"ok": false, "error": "..."}`), with the bot's token in the path:

    GET  /bot<token>/me                          -> {"ok": true, "id", "name"}
    GET  /bot<token>/updates?offset=N&timeout=T  -> {"ok": true, "updates": [...]}
    POST /bot<token>/send  {"chat_id", "thread_id", "text", "reply_to", "idempotency_key"}
                                                 -> {"ok": true, "message_id": "m<n>"}

A wrong token, or any token once `revoke_token()` was called, answers 401.
A poll with offset N acknowledges every update whose update_id is below N (they
are dropped; `acked` is the highest acknowledged update_id) and answers at once
if an update is waiting, else within T seconds. One poller at a time, as on
Telegram: a new poll makes an earlier one still waiting answer 409 at once.

The fake keeps its state for its whole life, across restarts of the process
that talks to it. The test drives it from its own thread (every method is
thread-safe): `inject()` an update, read `sent`, `fail_sends()`, `stall()` the
polls (the platform goes deaf: polls arrive and are never answered),
`hold_sends()` (sends arrive and get no answer until `release_sends()`, then
are taken as any send is, whether or not the client is still there to read the
answer: a platform that took a message from a client killed meanwhile), and
wait for what a client did with `wait_sent`, `wait_acked`, `wait_polls` and
`wait_held`, which block on a condition (no sleeping) and raise TimeoutError.

In its own process:

    python -m tests.fakes.chat_platform --token T

prints its base URL on one line and serves until killed.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from tests.fakes.local_http import LocalServer, TrackedHandler

BOT_ID, BOT_NAME = "bot-1", "testbot"


@attrs.define
class _Fault:
    status: int
    retry_after: float | None
    times: int


Answer = tuple[int, dict[str, Any]]


class FakeChatPlatform:
    def __init__(self, token: str = "t0k") -> None:
        self._history: dict[int, dict[str, Any]] = {}
        self.token = token
        self.revoked = False
        self.acked = 0  # the highest update_id acknowledged by a poll's offset
        self.polls = 0  # poll requests that arrived (any answer, 401 included)
        self._cond = threading.Condition()
        self._updates: list[dict[str, Any]] = []  # not yet acknowledged
        self._next_update = 0
        self._sent: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []  # sends answered with an injected fault
        self.held = 0  # sends waiting now for `release_sends()`
        self._holding = False
        self._releases = 0  # a held send waits for this to move
        self._fault: _Fault | None = None
        self._poll_generation = 0  # the newest poll's number; older waiting ones answer 409
        self._stalled = False
        self._closing = False
        fake = self

        class Handler(TrackedHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self._answer(fake._route("GET", self.path, None))

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("content-length", 0) or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._answer((400, {"ok": False, "error": "the body is not JSON"}))
                    return
                self._answer(fake._route("POST", self.path, body))

            def _answer(self, answer: Answer) -> None:
                status, body = answer
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    if body.get("retry_after") is not None:
                        self.send_header("retry-after", f"{body['retry_after']:g}")
                    if fake._closing:
                        self.send_header("connection", "close")
                        self.close_connection = True
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client went away (a cancelled poll): nobody to answer
                    self.close_connection = True

        self.server = LocalServer(Handler)

    # -- lifecycle ------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> FakeChatPlatform:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving: waiting and stalled polls and held sends answer 503 at once
        (a held send is not recorded), kept-alive connections are shut, and nothing is
        waited for."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        self.server.stop()

    # -- the test's control surface -------------------------------------------

    def inject(
        self,
        text: str,
        *,
        chat_id: str = "c1",
        user_id: str = "u1",
        user_name: str = "Ann",
        chat_type: str = "dm",
        thread_id: str | None = None,
        is_bot: bool = False,
        mentioned: bool = False,
    ) -> int:
        """A user writes to the bot: a new update, handed to a waiting poll at once."""
        with self._cond:
            self._next_update += 1
            update_id = self._next_update
            self._updates.append({
                "update_id": update_id,
                "chat_type": chat_type,
                "chat_id": chat_id,
                "user_id": user_id,
                "user_name": user_name,
                "text": text,
                "thread_id": thread_id,
                "is_bot": is_bot,
                "mentioned": mentioned,
                "message_id": f"in{update_id}",
                "event_id": f"e{update_id}",
            })  # fmt: skip
            self._history[update_id] = self._updates[-1]
            self._cond.notify_all()
            return update_id

    def replay(self, update_id: int) -> int:
        """Deliver an earlier update again, as a platform does after a reconnect: a new
        update id, the same event id and message."""
        with self._cond:
            self._next_update += 1
            again = {**self._history[update_id], "update_id": self._next_update}
            self._updates.append(again)
            self._history[self._next_update] = again
            self._cond.notify_all()
            return self._next_update

    @property
    def sent(self) -> list[dict[str, Any]]:
        """The sends the platform took, as their bodies were received, in order."""
        with self._cond:
            return [dict(s) for s in self._sent]

    @property
    def pending(self) -> list[int]:
        """The update_ids not yet acknowledged."""
        with self._cond:
            return [u["update_id"] for u in self._updates]

    def fail_sends(self, status: int, retry_after: float | None = None, times: int = 1) -> None:
        """The next `times` sends answer `status` (with `retry_after`) and are not recorded."""
        with self._cond:
            self._fault = _Fault(status, retry_after, times)

    def clear_faults(self) -> None:
        """Sends succeed again (the outage is over)."""
        with self._cond:
            self._fault = None

    def wait_refused(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The sends answered with a fault, once at least `count` were."""
        self._wait(lambda: len(self.refused) >= count, timeout, f"{count} refused send(s)")
        with self._cond:
            return [dict(s) for s in self.refused]

    def hold_sends(self) -> None:
        """Sends from now on arrive (and count in `held`) but get no answer until
        `release_sends()`."""
        with self._cond:
            self._holding = True

    def release_sends(self) -> None:
        """Held sends go on: each is answered like any other send (recorded in `sent`,
        unless a fault is set), whether or not its client is still there to read it."""
        with self._cond:
            self._holding = False
            self._releases += 1
            self._cond.notify_all()

    def wait_held(self, count: int, timeout: float = 10.0) -> None:
        """Until at least `count` sends are held."""
        self._wait(lambda: self.held >= count, timeout, f"{count} held send(s)")

    def stall(self) -> None:
        """Go deaf: polls still arrive (and count) but get no answer until `unstall()`."""
        with self._cond:
            self._stalled = True

    def unstall(self) -> None:
        with self._cond:
            self._stalled = False
            self._cond.notify_all()

    def revoke_token(self) -> None:
        """Every request from now on answers 401, whatever its token."""
        with self._cond:
            self.revoked = True
            self._cond.notify_all()

    def wait_sent(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The sends, once at least `count` were recorded."""
        self._wait(lambda: len(self._sent) >= count, timeout, f"{count} send(s)")
        return self.sent

    def wait_acked(self, update_id: int, timeout: float = 10.0) -> None:
        """Until a poll acknowledged `update_id`."""
        self._wait(lambda: self.acked >= update_id, timeout, f"update {update_id} acknowledged")

    def wait_polls(self, count: int, timeout: float = 10.0) -> None:
        """Until `count` polls arrived in the fake's life."""
        self._wait(lambda: self.polls >= count, timeout, f"{count} poll(s)")

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(ready, timeout):
                raise TimeoutError(f"the fake chat platform saw no {what} within {timeout:g} s")

    # -- serving (handler threads) --------------------------------------------

    def _route(self, method: str, path: str, body: Any) -> Answer:
        parts = urlsplit(path)
        segments = parts.path.split("/")
        if len(segments) != 3 or segments[0] or not segments[1].startswith("bot"):
            return 404, {"ok": False, "error": "not found"}
        token, call = segments[1][3:], segments[2]
        if call == "updates" and method == "GET":
            with self._cond:
                self.polls += 1
                self._cond.notify_all()
        with self._cond:
            if self.revoked or token != self.token:
                return 401, {"ok": False, "error": "unauthorized"}
        if call == "me" and method == "GET":
            return 200, {"ok": True, "id": BOT_ID, "name": BOT_NAME}
        if call == "updates" and method == "GET":
            query = parse_qs(parts.query)
            try:
                offset = int(query.get("offset", ["0"])[0])
                timeout = float(query.get("timeout", ["0"])[0])
            except ValueError:
                return 400, {"ok": False, "error": "offset and timeout must be numbers"}
            return self._poll(offset, max(0.0, timeout))
        if call == "send" and method == "POST":
            if not isinstance(body, dict):
                return 400, {"ok": False, "error": "the body must be a JSON object"}
            return self._send(body)
        return 404, {"ok": False, "error": "not found"}

    def _poll(self, offset: int, timeout: float) -> Answer:
        with self._cond:
            if offset > 0:
                self.acked = max(self.acked, offset - 1)
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._poll_generation += 1
            mine = self._poll_generation
            self._cond.notify_all()  # wakes an earlier poll to answer 409, and wait_acked
            deadline = time.monotonic() + timeout
            while True:
                if self._closing:
                    return 503, {"ok": False, "error": "shutting down"}
                if self._stalled:
                    self._cond.wait()
                    continue
                if mine != self._poll_generation:
                    return 409, {"ok": False, "error": "conflict: another poller"}
                ready = [dict(u) for u in self._updates if u["update_id"] >= offset]
                if ready:
                    return 200, {"ok": True, "updates": ready}
                left = deadline - time.monotonic()
                if left <= 0:
                    return 200, {"ok": True, "updates": []}
                self._cond.wait(left)

    def _send(self, body: dict[str, Any]) -> Answer:
        with self._cond:
            if self._holding:
                releases = self._releases
                self.held += 1
                self._cond.notify_all()
                try:
                    self._cond.wait_for(lambda: self._releases != releases or self._closing)
                finally:
                    self.held -= 1
                if self._closing:
                    return 503, {"ok": False, "error": "shutting down"}
            fault = self._fault
            if fault is not None and fault.times > 0:
                fault.times -= 1
                if fault.times <= 0:
                    self._fault = None
                self.refused.append(dict(body))
                self._cond.notify_all()
                answer: dict[str, Any] = {"ok": False, "error": f"injected fault {fault.status}"}
                if fault.retry_after is not None:
                    answer["retry_after"] = fault.retry_after
                return fault.status, answer
            self._sent.append(dict(body))
            self._cond.notify_all()
            return 200, {"ok": True, "message_id": f"m{len(self._sent)}"}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.chat_platform",
        description="A fake chat platform: prints its base URL, serves until killed.",
    )
    parser.add_argument("--token", default="t0k", help="the bot token it accepts (default t0k)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with FakeChatPlatform(token=args.token) as platform:
        print(platform.url, flush=True)
        try:
            platform.server.thread.join()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
