"""A fake BlueBubbles server on 127.0.0.1 (the user's Mac, relaying iMessage), written from
the server's REST API documentation, for hermes's iMessage adapter.

REST, every call with `?password=<PASSWORD>` (a missing or wrong one: 401 `{"status": 401,
"message": "Unauthorized", "error": {"type": "Authentication Error", ...}}`); answers are
`{"status": 200, "message": "Success", "data": ...}`:

    GET  /api/v1/ping                  -> data "pong"
    GET  /api/v1/server/info           -> data {"server_version", "private_api", ...}
    POST /api/v1/message/query         {"after" (ms), "chatGuid"?, "sort", "limit",
        "offset", "with": ["chat", "handle", "attachment"], "where"?: [{"statement":
        "message.is_from_me = :me", "args": {"me": 1}}]} -> data [messages]: those
        created after `after`, in `sort` order of dateCreated; each query recorded
    POST /api/v1/message/text          {"chatGuid", "tempGuid", "message", "method"}
        -> data the message sent (its `guid`, the `tempGuid` given: only this answer
        has it, as the real server's; its query and webhook serialize no tempGuid, and
        it drops no repeated one); recorded in `sent`
    POST /api/v1/message/attachment    multipart chatGuid, tempGuid, name, method,
        attachment (the file) -> data the message; recorded in `sent` and `uploads`
    GET  /api/v1/attachment/{guid}/download -> the bytes; recorded in `downloads`
    POST /api/v1/chat/{guid}/typing    -> 200 with the private API on, else 500 ("iMessage
        Private API is not enabled!"); recorded in `typing`

A message is `{"guid", "text", "dateCreated", "dateRead", "isFromMe", "itemType": 0,
"handle": {"address"} (None for the Mac's own), "chats": [{"guid"}], "attachments":
[{"guid", "mimeType", "transferName", "totalBytes"}], "associatedMessageType",
"associatedMessageGuid"}`. A DM's chat guid is
`iMessage;-;<address>`, a group's `iMessage;+;<id>`.

The webhook (the server's side toward hermes at `webhook_url`, set by `configure`):
`message()` stores a user's message and POSTs `{"type": "new-message", "data": message}`
from a thread of its own (one chat's deliveries in order). BlueBubbles tries each
delivery once: an answer other than 2xx, or none, is only recorded in `deliveries`.
`deliver=False` stores a message without delivering it (sent while hermes was stopped, or
a delivery that failed); `token=` delivers, with that token in the URL, a message the
server does not have (a forger's).
`tapback()` and `read()` send what the server sends for a tapback (a new-message with an
`associatedMessageType`) and a read receipt (`updated-message`). A message hermes sends
is delivered back as a new-message `isFromMe`, as the server does.

`pass_time(seconds)`: the server's clock (its messages' `dateCreated`) moves ahead.

Faults: `fail(route, status)` answers the next call of a route (`text`, `attachment`,
`query`, `info`, `download`) with `status`; `lose_answer(sent=True)`: the next text send
is taken (stored, recorded) and the connection closes without an answer, as when the
server sent it and the answer was lost; `sent=False`: it closes before anything is sent.
`private_api(on)`. `revoke()`: the password changes (every call 401).

In its own process: `python -m tests.fakes.bluebubbles` prints its URL and serves until
killed; `POST /_fake/<control>` (configure, message, fail) and `GET /_fake/state` drive it.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from tests.fakes.kit import Fake, observed, serve_until_killed
from tests.fakes.local_http import (
    BodyError,
    Reply,
    TrackedHandler,
    decode_object,
    form_parts,
    match,
    routes,
)
from tests.fakes.local_http import query as query_of

PASSWORD = "bb-server-password-0001"
ANN = "+15550000001"  # a user's phone number, E.164


def dm(address: str) -> str:
    return f"iMessage;-;{address}"


def group(name: str) -> str:
    return f"iMessage;+;{name}"


def _error(status: int, message: str, kind: str, said: str) -> Reply:
    return Reply(status, {"status": status, "message": message,
                          "error": {"type": kind, "message": said}})  # fmt: skip


def _ok(data: Any) -> Reply:
    return Reply(200, {"status": 200, "message": "Success", "data": data})


class FakeBlueBubbles(Fake):
    name = "BlueBubbles"
    _channel_field = "chatGuid"
    _CONTROLS = frozenset({"configure", "message", "fail"})
    _STATE = ("sent", "deliveries", "queries", "uploads", "downloads", "typing", "refused",
              "webhook_url")  # fmt: skip
    _ROUTES = routes(
        ("GET", "/api/v1/ping", "_ping"),
        ("GET", "/api/v1/server/info", "_info"),
        ("POST", "/api/v1/message/query", "_query"),
        ("POST", "/api/v1/message/text", "_text"),
        ("POST", "/api/v1/message/attachment", "_attachment"),
        ("GET", "/api/v1/attachment/{guid}/download", "_download"),
        ("POST", "/api/v1/chat/{chat}/typing", "_show_typing"),
    )

    def __init__(self, password: str = PASSWORD, private_api: bool = False) -> None:
        super().__init__()
        self.password = password
        self.webhook_url: str | None = None
        self.echo_own = True  # deliver hermes's own messages back, as the server does
        self._private_api = private_api
        self._ids = itertools.count(1)
        self._last_ms = 0
        self._ahead_ms = 0  # how far pass_time moved the server's clock
        self._messages: list[dict[str, Any]] = []
        self._files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._deliveries: list[dict[str, Any]] = []
        self._queries: list[dict[str, Any]] = []
        self._uploads: list[dict[str, Any]] = []
        self._downloads: list[str] = []
        self._typing: list[str] = []
        self._refused: list[dict[str, Any]] = []
        self._lanes: dict[str, threading.Lock] = {}
        self._client = httpx.Client(timeout=30.0)

    def _stop(self) -> None:
        super()._stop()
        self._client.close()

    sent = observed("_sent", "hermes's sends: `chatGuid`, `tempGuid`, `message`, `guid`, `at`.")
    deliveries = observed("_deliveries", "Each webhook POST: `guid`, `type`, `status_code`.")
    queries = observed("_queries", "Each message query's body, with its `at`.")
    uploads = observed("_uploads", "Each attachment sent: `chatGuid`, `name`, `size`, `content`.")
    downloads = observed("_downloads", "The guids of the attachments downloaded.")
    typing = observed("_typing", "The chats typing was shown in.")
    refused = observed("_refused", "Each call answered with an error: `route`, `status`.")

    # -- what a test does ----------------------------------------------------------------

    def configure(self, **values: Any) -> None:
        """Set `webhook_url` (with its `?token=`), `echo_own`."""
        self._change(**values)

    def private_api(self, on: bool) -> None:
        self._change(_private_api=on)

    def revoke(self) -> None:
        """The server's password is changed: every call is refused."""
        self._change(password="changed by the user")

    def pass_time(self, seconds: float) -> None:
        """The messages stored from now on are dated `seconds` later."""
        with self._cond:
            self._ahead_ms += int(seconds * 1000)

    def fail(self, route: str, status: int, times: int = 1) -> None:
        """The next `times` calls of `route` answer `status`."""
        with self._cond:
            self._faults.add(("status", status), route, times=times)

    def lose_answer(self, sent: bool = True, times: int = 1) -> None:
        """The next text send's connection closes unanswered, after it was sent (`sent`) or
        before."""
        with self._cond:
            self._faults.add(("lose", sent), "text", times=times)

    def message(self, text: str, user: str = ANN, chat: str | None = None,
                attachment: tuple[str, str, str] | None = None, deliver: bool = True,
                token: str | None = None) -> str:  # fmt: skip
        """A user's message (in their DM unless `chat` names a group); `attachment` (name,
        text, MIME type); delivered unless `deliver` is False; its guid. `token`: a
        forger's, delivered with that token, of a message the server does not have."""
        with self._cond:
            message = self._store(text, user, chat or dm(user))
            if token is not None:
                self._messages.remove(message)
            if attachment is not None:
                name, content, mime = attachment
                info = {"guid": f"att-{next(self._ids):08d}", "mimeType": mime,
                        "transferName": name, "totalBytes": len(content.encode())}  # fmt: skip
                self._files[info["guid"]] = (info, content.encode())
                message["attachments"] = [info]
        if deliver:
            self.deliver("new-message", message, token=token)
        return str(message["guid"])

    def tapback(self, guid: str, kind: str = "love", user: str = ANN) -> str:
        """`user` reacts to the message `guid`: a new-message that is a tapback."""
        with self._cond:
            target = next(m for m in self._messages if m["guid"] == guid)
            message = self._store(f'Loved "{target["text"]}"', user, target["chats"][0]["guid"])
            message.update(associatedMessageType=kind, associatedMessageGuid=f"p:0/{guid}")
        self.deliver("new-message", message)
        return str(message["guid"])

    def read(self, guid: str) -> None:
        """The message `guid` was read: an updated-message with its `dateRead`."""
        with self._cond:
            message = next(m for m in self._messages if m["guid"] == guid)
            message["dateRead"] = self._now_ms()
        self.deliver("updated-message", message)

    def deliver(self, kind: str, message: dict[str, Any], token: str | None = None) -> None:
        """POST the event to `webhook_url` from a thread (one chat's in order), once."""
        chat = message["chats"][0]["guid"] if message.get("chats") else ""
        with self._cond:
            lock = self._lanes.setdefault(chat, threading.Lock())
            payload = {"type": kind, "data": dict(message)}
        threading.Thread(target=self._deliver, args=(payload, token, lock), daemon=True).start()

    def _deliver(self, payload: dict[str, Any], token: str | None, lock: threading.Lock) -> None:
        with lock:
            with self._cond:
                self._cond.wait_for(lambda: self.webhook_url or self._closing)
                url, closing = str(self.webhook_url), self._closing
            if closing:
                return
            if token is not None:
                parts = urlsplit(url)
                others = [f"{k}={v}" for k, v in parse_qsl(parts.query) if k != "token"]
                url = urlunsplit(parts._replace(query="&".join([*others, f"token={token}"])))
            record: dict[str, Any] = {"guid": payload["data"]["guid"], "type": payload["type"]}
            try:
                record["status_code"] = self._client.post(url, json=payload).status_code
            except httpx.HTTPError as exc:
                record["error"] = type(exc).__name__
            with self._cond:
                record["at"] = time.monotonic()
                self._deliveries.append(record)
                self._cond.notify_all()

    def wait_delivered(self, guid: str, count: int = 1, timeout: float = 30.0) -> dict[str, Any]:
        """The `count`th webhook POST of the message `guid`, once it was answered (or
        failed)."""
        done = self._wait_records("_deliveries", count, timeout, f"{guid} delivered {count}x",
                                  lambda d: d["guid"] == guid)  # fmt: skip
        return done[count - 1]

    def deliver_again(self, guid: str) -> None:
        """The stored message `guid` delivered once more (a replay)."""
        with self._cond:
            message = next(m for m in self._messages if m["guid"] == guid)
        self.deliver("new-message", message)

    def messages_in(self, chat: str) -> list[dict[str, Any]]:
        with self._cond:
            return [dict(m) for m in self._messages if m["chats"][0]["guid"] == chat]

    # -- the store -----------------------------------------------------------------------

    def _now_ms(self) -> int:
        self._last_ms = max(int(time.time() * 1000) + self._ahead_ms, self._last_ms + 1)
        return self._last_ms

    def _store(self, text: str, user: str | None, chat: str) -> dict[str, Any]:
        message = {"guid": f"msg-{next(self._ids):08d}", "text": text,
                   "dateCreated": self._now_ms(), "dateRead": None, "isFromMe": user is None,
                   "itemType": 0, "handle": None if user is None else {"address": user},
                   "chats": [{"guid": chat}], "attachments": [],
                   "associatedMessageType": None, "associatedMessageGuid": None}  # fmt: skip
        self._messages.append(message)
        self._cond.notify_all()
        return message

    # -- the REST API --------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return _error(500, "Server Error", "Server Error", "the fake failed")

    def _no_route(self, request: TrackedHandler, status: int) -> Reply:
        return _error(status, "Not Found", "Not Found", "no such route")

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        """The route's answer once the password is checked and the faults looked at (a
        fault names its route by its handler's name: text, query, info...)."""
        found = match(self._ROUTES, request.command, urlsplit(request.path).path)
        if isinstance(found, int):
            return self._no_route(request, found)
        handler, params = found
        with self._cond:
            if query_of(request.path).get("password") != self.password:
                return self._refuse("auth", 401, "Unauthorized")
            fault = self._faults.take(handler.strip("_"))
            if fault is None:
                return getattr(self, handler)(request, raw, **params)
            if fault[0] == "status":
                return self._refuse(handler.strip("_"), fault[1], "Server Error")
            if fault[1]:  # sent, and its answer lost
                getattr(self, handler)(request, raw, **params)
            return None

    def _refuse(self, route: str, status: int, message: str) -> Reply:
        self._refused.append({"route": route, "status": status})
        self._cond.notify_all()
        if status == 401:
            return _error(401, "Unauthorized", "Authentication Error",
                          "You are not authorized to access this resource")  # fmt: skip
        return _error(status, message, "Server Error", f"the fake answers {status}")

    def _ping(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, {"status": 200, "message": "Ping received!", "data": "pong"})

    def _info(self, request: TrackedHandler, raw: bytes) -> Reply:
        return _ok({"server_version": "1.9.9", "os_version": "15.1", "private_api":
                    self._private_api, "helper_connected": self._private_api})  # fmt: skip

    def _body(self, request: TrackedHandler, raw: bytes) -> dict[str, Any] | Reply:
        try:
            return decode_object(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            return self._refuse("body", 400, str(exc))

    def _query(self, request: TrackedHandler, raw: bytes) -> Reply:
        body = self._body(request, raw)
        if isinstance(body, Reply):
            return body
        self._queries.append({**body, "at": time.monotonic()})
        self._cond.notify_all()
        after, chat = int(body.get("after") or 0), body.get("chatGuid")
        mine = any(w.get("args", {}).get("me") == 1 for w in body.get("where") or [])
        found = [m for m in self._messages if m["dateCreated"] > after
                 and chat in (None, m["chats"][0]["guid"])
                 and (m["isFromMe"] or not mine)]  # fmt: skip
        found.sort(key=lambda m: m["dateCreated"], reverse=body.get("sort") == "DESC")
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 100)
        with_ = set(body.get("with") or [])
        page = [{k: v for k, v in m.items() if k != "chats" or "chat" in with_}
                for m in found[offset : offset + limit]]  # fmt: skip
        return _ok(page)

    def _sent_message(self, chat: str, temp: str, text: str, method: str) -> dict[str, Any]:
        """The message stored: the send's answer adds its `tempGuid`."""
        message = self._store(text, None, chat)
        self._sent.append({"chatGuid": chat, "tempGuid": temp, "message": text,
                           "method": method, "guid": message["guid"],
                           "at": time.monotonic()})  # fmt: skip
        if self.echo_own and self.webhook_url:
            self.deliver("new-message", message)
        return message

    def _text(self, request: TrackedHandler, raw: bytes) -> Reply:
        body = self._body(request, raw)
        if isinstance(body, Reply):
            return body
        chat, temp = str(body.get("chatGuid") or ""), str(body.get("tempGuid") or "")
        if not chat or not temp or not body.get("message"):
            return self._refuse("text", 400, "Bad Request")
        if body.get("method") == "private-api" and not self._private_api:
            return self._refuse("text", 400, "Bad Request")
        message = self._sent_message(chat, temp, str(body["message"]), str(body.get("method")))
        return _ok({**message, "tempGuid": temp})

    def _attachment(self, request: TrackedHandler, raw: bytes) -> Reply:
        try:
            parts = {p.name: p for p in form_parts(request.headers.get("content-type", ""), raw)}
        except BodyError as exc:
            return self._refuse("attachment", 400, str(exc))
        file = parts.get("attachment")
        if file is None or "chatGuid" not in parts or "tempGuid" not in parts:
            return self._refuse("attachment", 400, "Bad Request")
        name = parts["name"].text() if "name" in parts else str(file.filename)
        temp = parts["tempGuid"].text()
        message = self._sent_message(parts["chatGuid"].text(), temp, "", "")
        info = {"guid": f"att-{next(self._ids):08d}", "mimeType": file.mime_type,
                "transferName": name, "totalBytes": len(file.data)}  # fmt: skip
        message["attachments"] = [info]
        self._uploads.append({"chatGuid": parts["chatGuid"].text(), "name": name,
                              "size": len(file.data), "content": file.data})  # fmt: skip
        return _ok({**message, "tempGuid": temp})

    def _download(self, request: TrackedHandler, raw: bytes, guid: str) -> Reply:
        if guid not in self._files:
            return self._refuse("download", 404, "Not Found")
        self._downloads.append(guid)
        self._cond.notify_all()
        info, data = self._files[guid]
        return Reply(200, data, content_type=info["mimeType"])

    def _show_typing(self, request: TrackedHandler, raw: bytes, chat: str) -> Reply:
        if not self._private_api:
            return self._refuse("typing", 500, "iMessage Private API is not enabled!")
        self._typing.append(chat)
        return _ok(None)


def main() -> None:
    serve_until_killed(FakeBlueBubbles())


if __name__ == "__main__":
    main()
