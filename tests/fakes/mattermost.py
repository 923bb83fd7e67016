"""A fake Mattermost server (API v4 and its WebSocket on one port), written from
Mattermost's API reference, for hermes's Mattermost adapter.

- The bot is `@hermes` (BOT_ID), in one team; its token is BOT_TOKEN. Every REST call
  needs it as a bearer: a missing, wrong or revoked one is a 401
  `api.context.session_expired.app_error`. Errors are `{"id", "message",
  "status_code"}`; a rate limit (a fault) is a 429 with `X-Ratelimit-Limit`,
  `X-Ratelimit-Remaining` and `X-Ratelimit-Reset` (seconds).
- `GET /api/v4/websocket`: the client authenticates with `{"seq": 1, "action":
  "authentication_challenge", "data": {"token": ...}}`, answered `{"status": "OK",
  "seq_reply": 1}` and then `hello` (seq 0); a bad token is answered FAIL and closed.
  Each event then carries the next `seq` of that socket. `ping` is answered `pong`,
  `user_typing` recorded. WebSocket ping frames are answered (tests/fakes/websocket.py).
- Channels: a user's DM with the bot (`D`, id `dm-<user>`), `town-square` (`O`), any
  other named by a test; the bot is a member of each unless a test adds it later
  (`join`, which sends `user_added`). Listed by `GET /users/me/teams` and
  `/users/me/teams/{team}/channels` (DMs included), each with its `last_post_at`.
- `message(...)` makes a user's post and pushes a `posted` event (the post as a JSON
  string, `channel_type`, `mentions`, `sender_name`) to every authenticated socket.
  With no socket open it is only stored: the catch-up (`GET
  /channels/{id}/posts?since=ms`: posts created or modified after it, at most
  `since_cap` of them (the server's LIMIT 1000, in no order: here the oldest); or
  `?page=&per_page=`: newest first) is how a client gets it. `lost=True` spends a seq
  without sending (a gap); `again=True` also pushes it on the next socket to
  authenticate (the socket and the catch-up both bring it).
- `POST /posts`, `PUT /posts/{id}/patch` (only the bot's own; 404 for none), `POST
  /files` (multipart `channel_id` and `files`), `GET /files/{id}`.
- `press(post_id, command)`: as the server does for an interactive button, POSTs
  `{user_id, user_name, channel_id, post_id, team_id, trigger_id, type, context}` to
  the action's integration URL; the answer is recorded in `presses`.
- Faults: `fail(route, status, error_id)` for the next call of a route (me, teams,
  channel_list, since, create, patch, upload, download), `revoke_token()` (sockets
  closed, every call 401), `drop()` (sockets cut), `half_open()` (the newest socket goes
  silent), `unreadable(channel, status)` (its posts answer `status`; None: readable).

In its own process: `python -m tests.fakes.mattermost` prints its URL and serves until
killed; `POST {url}/_fake/<control>` calls message, fail, drop, half_open,
revoke_token, press, join; `GET {url}/_fake/state` answers the records.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import attrs

from tests.fakes.kit import observed, serve_until_killed
from tests.fakes.local_http import (
    BodyError,
    ErrorShape,
    Reply,
    TrackedHandler,
    bearer,
    decode_object,
    form_parts,
    match,
    query,
    routes,
)
from tests.fakes.websocket import WebSocket, WebSocketFake

BOT_TOKEN = "mm-bot-token-0001"
BOT_ID = "hermesbotuserid00000000001"
BOT_NAME = "hermes"
TEAM_ID = "teamid000000000000000000001"
TOWN = "town-square"
MAX_MESSAGE = 16383
SESSION_EXPIRED = "api.context.session_expired.app_error"
ERROR = ErrorShape("message", code="id", status="status_code")


@attrs.define(eq=False, kw_only=True)
class _Socket(WebSocket):
    authed: bool = False
    seq: int = -1  # the last event's

    def info(self) -> dict[str, Any]:
        return {**super().info(), "authed": self.authed}


class FakeMattermost(WebSocketFake):
    name = "Mattermost"
    _other_verbs = ("PUT",)
    _socket_paths = frozenset({"/api/v4/websocket"})
    _socket_class = _Socket
    _channel_field = "channel_id"
    _ROUTES = routes(
        ("GET", "/api/v4/users/me", "_me"),
        ("GET", "/api/v4/users/me/teams", "_teams"),
        ("GET", "/api/v4/users/me/teams/{team}/channels", "_channel_list"),
        ("GET", "/api/v4/channels/{channel}/posts", "_since"),
        ("POST", "/api/v4/posts", "_create"),
        ("PUT", "/api/v4/posts/{post}/patch", "_patch"),
        ("POST", "/api/v4/files", "_upload"),
        ("GET", "/api/v4/files/{file}", "_download"),
    )
    _CONTROLS = frozenset({"message", "fail", "drop", "half_open", "revoke_token", "press", "join"})
    _STATE = ("sent", "edits", "catchups", "typing", "presses", "refused", "uploads",
              "downloads", "open_sockets", "sockets", "received")  # fmt: skip

    def __init__(self, token: str = BOT_TOKEN) -> None:
        super().__init__()
        self.token = token
        self._revoked = False
        self._ids = itertools.count(1)
        self._last_ms = 0
        self._channels: dict[str, dict[str, Any]] = {}
        self._posts: dict[str, dict[str, Any]] = {}
        self._again: list[tuple[str, dict[str, Any]]] = []  # events for the next socket
        self._files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._edits: list[dict[str, Any]] = []
        self._catchups: list[dict[str, Any]] = []
        self._typing: list[dict[str, Any]] = []
        self._presses: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._uploads: list[dict[str, Any]] = []
        self._downloads: list[str] = []
        self._actions_base: str | None = None  # where presses go instead (a reverse proxy)
        self._unreadable: dict[str, int] = {}  # channel -> the status its posts answer
        self.since_cap = 1000  # posts in one `posts?since=` answer at most
        self._channel(TOWN, "O")

    sent = observed("_sent", "The bot's posts, as created: `id`, `channel_id`, `message`...")
    edits = observed("_edits", "The bot's patches: `id`, `channel_id`, `message`, `props`, `at`.")
    catchups = observed("_catchups", "Each posts read: `channel`, `since` or `page`, `at`.")
    typing = observed("_typing", "Each `user_typing` action's data.")
    presses = observed("_presses", "Each press: its `post_id`, `command`, the answer.")
    refused = observed("_refused", "Each call answered with an error: `route`, `status`.")
    uploads = observed("_uploads", "Each file uploaded: `id`, `name`, `size`, `channel_id`.")
    downloads = observed("_downloads", "The ids of the files downloaded.")

    # -- what a test does ---------------------------------------------------------------

    def message(self, text: str, user: str = "ann", channel: str | None = None,
                kind: str = "D", root_id: str = "", mention: bool = False,
                bot: bool = False, lost: bool = False, again: bool = False,
                file: tuple[str, str] | None = None, at: int | None = None) -> str:  # fmt: skip
        """A user's post (in their DM by default; `kind` O for a channel, `mention` puts
        `@hermes` first, `file` (name, text) attaches one; `at` its create_at, as a post
        a node took then and committed now); its id."""
        with self._cond:
            channel = channel or (f"dm-{user}" if kind == "D" else TOWN)
            kind = self._channel(channel, kind)["type"]
            text = f"@{BOT_NAME} {text}" if mention else text
            post = self._post(user, channel, text, root_id, at)
            if bot:
                post["props"] = {"from_bot": "true"}
            if file is not None:
                info = self._file(file[0], file[1].encode(), channel)
                post["file_ids"], post["metadata"] = [info["id"]], {"files": [info]}
            mentions = json.dumps([BOT_ID] if mention else [])
            data = {"post": json.dumps(post), "channel_type": kind, "sender_name": "@" + user,
                    "mentions": mentions, "team_id": TEAM_ID}  # fmt: skip
            self._broadcast("posted", data, lost=lost)
            if again:
                self._again.append(("posted", data))
            return post["id"]

    def join(self, channel: str, kind: str = "O") -> None:
        """The bot is added to `channel` (made if new): `user_added` on every socket."""
        with self._cond:
            self._channel(channel, kind)["member"] = True
            self._broadcast("user_added", {"user_id": BOT_ID, "team_id": TEAM_ID}, channel)

    def leave_out(self, channel: str, kind: str = "O") -> None:
        """A channel the bot is not in (yet): its posts reach neither socket nor catch-up."""
        with self._cond:
            self._channel(channel, kind)["member"] = False

    def fail(self, route: str, status: int, error_id: str = "", reset: float = 1,
             times: int = 1) -> None:  # fmt: skip
        """The next `times` calls of `route` answer `status` (429: with the headers)."""
        self._faults.add((status, error_id, reset), route, times=times)

    def revoke_token(self) -> None:
        """The bot's token is revoked: its sessions end, every call is a 401."""
        with self._cond:
            self._revoked = True
            self._close_all()

    def drop(self, then: str | tuple[str, ...] = (), **post: Any) -> int:
        """Cut every open socket (a network failure); how many. `then`: the text of a post
        (or of several; `post`: message's other arguments) made before a new socket can
        open (only a catch-up brings them)."""
        with self._cond:
            cut = self._close_all()
            for text in (then,) if isinstance(then, str) else then:
                self.message(text, **post)
            return cut

    def unreadable(self, channel: str, status: int | None = 403) -> None:
        """`GET /channels/{channel}/posts` answers `status` (None: it is read again)."""
        with self._cond:
            if status is None:
                self._unreadable.pop(channel, None)
            else:
                self._unreadable[channel] = status

    def half_open(self) -> None:
        """The newest socket goes silent both ways."""
        with self._cond:
            self._sockets[-1].half_open = True
            self._cond.notify_all()

    def route_actions(self, base: str) -> None:
        """Presses go to `base` (scheme and host) with the action URL's path: the reverse
        proxy in front of hermes's listener, whose public URL the button names."""
        with self._cond:
            self._actions_base = base.rstrip("/")

    def press(self, post_id: str, command: str, user: str = "ann",
              context: dict[str, Any] | None = None) -> int:  # fmt: skip
        """Press the button of the bot's post whose command is `command`, as the server
        does (`context`: sent instead of the button's, a forgery); the status answered."""
        with self._cond:
            post = self._posts[post_id]
            actions = [a for att in (post.get("props") or {}).get("attachments") or []
                       for a in att.get("actions") or []]  # fmt: skip
            action = next(a for a in actions if a["integration"]["context"]["command"] == command)
            payload = {"user_id": user, "user_name": user, "channel_id": post["channel_id"],
                       "post_id": post_id, "team_id": TEAM_ID, "type": "button",
                       "trigger_id": f"trigger{next(self._ids)}",
                       "context": context or action["integration"]["context"]}  # fmt: skip
            url = action["integration"]["url"]
            if self._actions_base is not None:
                url = self._actions_base + urlsplit(url).path
        request = urllib.request.Request(url, json.dumps(payload).encode(),
                                         {"content-type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        with self._cond:
            self._presses.append({"post_id": post_id, "command": command, "status": status,
                                  "body": body.decode("utf-8", "replace")})  # fmt: skip
            self._cond.notify_all()
        return status

    def posts_in(self, channel: str) -> list[dict[str, Any]]:
        """The posts of `channel` now (edits applied), oldest first."""
        with self._cond:
            return [dict(p) for p in self._posts.values() if p["channel_id"] == channel]

    def created_at(self, post_id: str) -> int:
        with self._cond:
            return self._posts[post_id]["create_at"]

    def wait_authenticated(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` sockets were authenticated in the fake's life."""
        self._wait(lambda: sum(s.authed for s in self._sockets) >= count, timeout,
                   f"{count} authenticated socket(s)")  # fmt: skip

    # -- the store ------------------------------------------------------------------------

    def _now_ms(self) -> int:
        self._last_ms = max(int(time.time() * 1000), self._last_ms + 1)
        return self._last_ms

    def _channel(self, channel: str, kind: str) -> dict[str, Any]:
        if channel not in self._channels:
            team = "" if kind in ("D", "G") else TEAM_ID
            self._channels[channel] = {"id": channel, "type": kind, "team_id": team,
                                       "name": channel, "last_post_at": 0,
                                       "member": True}  # fmt: skip
        return self._channels[channel]

    def _post(
        self, user: str, channel: str, text: str, root: str, at: int | None = None
    ) -> dict[str, Any]:
        now = self._now_ms() if at is None else at
        post = {"id": f"post{next(self._ids):022d}", "channel_id": channel, "user_id": user,
                "root_id": root, "message": text, "create_at": now, "update_at": now,
                "edit_at": 0, "delete_at": 0, "type": "", "props": {}, "file_ids": []}  # fmt: skip
        self._posts[post["id"]] = post
        self._channels[channel]["last_post_at"] = max(now, self._channels[channel]["last_post_at"])
        self._cond.notify_all()
        return post

    def _file(self, name: str, data: bytes, channel: str) -> dict[str, Any]:
        info = {"id": f"file{next(self._ids):022d}", "name": name, "size": len(data),
                "mime_type": "text/plain", "channel_id": channel}  # fmt: skip
        self._files[info["id"]] = (info, data)
        return info

    # -- the socket ------------------------------------------------------------------------

    def _broadcast(
        self, event: str, data: dict[str, Any], channel: str = "", lost: bool = False
    ) -> None:
        channel = channel or json.loads(data.get("post", "{}")).get("channel_id", "")
        if not self._channels.get(channel, {}).get("member", True):
            return
        for sock in self._sockets:
            if sock.authed and sock.closed_at is None and not sock.close_now:
                self._push(sock, event, data, channel, lost)

    def _push(self, sock: _Socket, event: str, data: dict[str, Any], channel: str = "",
              lost: bool = False) -> None:  # fmt: skip
        sock.seq += 1
        if not lost:
            frame = {"event": event, "data": data, "seq": sock.seq,
                     "broadcast": {"channel_id": channel, "team_id": TEAM_ID}}  # fmt: skip
            sock.outbox.append((json.dumps(frame), None))
        self._cond.notify_all()

    def _close_all(self) -> int:
        live = [s for s in self._sockets if s.closed_at is None and not s.close_now]
        for sock in live:
            sock.close_now = sock.cut = True
        self._cond.notify_all()
        return len(live)

    def _ws_refusal(self, status: int, why: str) -> Reply:
        return ERROR.reply(status, why, "api.web_socket.connect.upgrade.app_error")

    def _on_frame(self, sock: _Socket, frame: Any, now: float) -> None:
        if not isinstance(frame, dict):
            return
        seq, action, data = frame.get("seq"), frame.get("action"), frame.get("data") or {}
        if action == "authentication_challenge":
            if data.get("token") != self.token or self._revoked:
                reply = {"status": "FAIL", "seq_reply": seq, "error": {"id": SESSION_EXPIRED}}
                sock.outbox.append((json.dumps(reply), None))
                sock.close_now = True
                return
            sock.outbox.append((json.dumps({"status": "OK", "seq_reply": seq}), None))
            sock.authed = True
            self._push(sock, "hello", {"server_version": "10.0.0"})
            for event, again in self._again:
                self._push(sock, event, again)
            self._again.clear()
        elif not sock.authed:
            return
        elif action == "ping":
            pong = {"status": "OK", "seq_reply": seq, "data": {"text": "pong"}}
            sock.outbox.append((json.dumps(pong), None))
        elif action == "user_typing":
            self._typing.append(data)

    # -- the REST API ----------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return ERROR.reply(500, "internal error", "app.internal.app_error")

    def _no_route(self, request: TrackedHandler, status: int) -> Reply:
        return ERROR.reply(status, "not found", "api.context.404.app_error")

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        """The route's answer, once the token is checked and the faults looked at (each
        fault names its route by its handler's name: me, since, create, patch...)."""
        found = match(self._ROUTES, request.command, urlsplit(request.path).path)
        if isinstance(found, int):
            return self._no_route(request, found)
        handler, params = found
        route = handler.strip("_")
        with self._cond:
            if bearer(request.headers) != self.token or self._revoked:
                return self._refuse(route, 401, SESSION_EXPIRED, "Invalid or expired session")
            fault = self._faults.take(route)
            if fault is not None:
                status, error_id, reset = fault
                reply = self._refuse(route, status, error_id or "app.fault", "said")
                if status == 429:
                    reply.headers.extend([("X-Ratelimit-Limit", "10"),
                                          ("X-Ratelimit-Remaining", "0"),
                                          ("X-Ratelimit-Reset", f"{reset:g}")])  # fmt: skip
                return reply
            return getattr(self, handler)(request, raw, **params)

    def _refuse(self, route: str, status: int, error_id: str, message: str) -> Reply:
        self._refused.append({"route": route, "status": status, "id": error_id})
        self._cond.notify_all()
        return ERROR.reply(status, message, error_id)

    def _me(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, {"id": BOT_ID, "username": BOT_NAME, "is_bot": True})

    def _teams(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, [{"id": TEAM_ID, "name": "test", "display_name": "Test"}])

    def _channel_list(self, request: TrackedHandler, raw: bytes, team: str) -> Reply:
        if team != TEAM_ID:
            return self._refuse("channels", 403, "api.context.permissions.app_error", "no")
        return Reply(200, [dict(c) for c in self._channels.values() if c["member"]])

    def _since(self, request: TrackedHandler, raw: bytes, channel: str) -> Reply:
        if not self._channels.get(channel, {}).get("member"):
            return self._refuse("since", 403, "api.context.permissions.app_error", "no")
        if channel in self._unreadable:
            status = self._unreadable[channel]
            return self._refuse("since", status, "app.channel.get.app_error", "unreadable")
        asked = query(request.path)
        if "since" not in asked:  # a page, newest first
            page, per_page = int(asked.get("page") or 0), int(asked.get("per_page") or 60)
            self._catchups.append({"channel": channel, "page": page, "at": time.monotonic()})
            newest = sorted((p for p in self._posts.values() if p["channel_id"] == channel),
                            key=lambda p: -p["create_at"])  # fmt: skip
            found = newest[page * per_page : (page + 1) * per_page]
        else:
            since = int(asked["since"])
            self._catchups.append({"channel": channel, "since": since, "at": time.monotonic()})
            found = [p for p in self._posts.values()
                     if p["channel_id"] == channel and p["update_at"] > since]  # fmt: skip
            found = sorted(found, key=lambda p: p["create_at"])[: self.since_cap]
        order = [p["id"] for p in sorted(found, key=lambda p: -p["create_at"])]
        return Reply(200, {"order": order, "posts": {p["id"]: dict(p) for p in found},
                           "next_post_id": "", "prev_post_id": ""})  # fmt: skip

    def _body(self, request: TrackedHandler, raw: bytes) -> dict[str, Any] | Reply:
        try:
            return decode_object(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            return self._refuse("body", 400, "api.context.invalid_body_param.app_error", str(exc))

    def _create(self, request: TrackedHandler, raw: bytes) -> Reply:
        body = self._body(request, raw)
        if isinstance(body, Reply):
            return body
        channel, text = str(body.get("channel_id") or ""), str(body.get("message") or "")
        root, files = str(body.get("root_id") or ""), body.get("file_ids") or []
        if channel not in self._channels:
            return self._refuse("posts", 403, "api.context.permissions.app_error", "no channel")
        if len(text) > MAX_MESSAGE or (not text and not files):
            return self._refuse("posts", 400, "model.post.is_valid.msg.app_error", "bad message")
        if root and root not in self._posts:
            return self._refuse("posts", 400, "api.post.create_post.root_id.app_error", "root")
        if any(f not in self._files for f in files):
            return self._refuse("posts", 400, "api.post.create_post.file_ids.app_error", "file")
        post = self._post(BOT_ID, channel, text, root)
        post.update(props=body.get("props") or {}, file_ids=list(files))
        self._sent.append({**post, "at": time.monotonic()})
        return Reply(201, dict(post))

    def _patch(self, request: TrackedHandler, raw: bytes, post: str) -> Reply:
        body = self._body(request, raw)
        if isinstance(body, Reply):
            return body
        found = self._posts.get(post)
        if found is None:
            return self._refuse("patch", 404, "app.post.get.app_error", "no such post")
        if found["user_id"] != BOT_ID:
            return self._refuse("patch", 403, "api.context.permissions.app_error", "not yours")
        now = self._now_ms()
        found.update(message=str(body.get("message", found["message"])), edit_at=now, update_at=now)
        if "props" in body:
            found["props"] = body["props"] or {}
        self._edits.append({**found, "at": time.monotonic()})
        self._cond.notify_all()
        return Reply(200, dict(found))

    def _upload(self, request: TrackedHandler, raw: bytes) -> Reply:
        try:
            parts = form_parts(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            return self._refuse("files", 400, "api.file.upload_file.app_error", str(exc))
        fields = {p.name: p for p in parts}
        channel, given = fields.get("channel_id"), fields.get("files")
        if channel is None or given is None or given.filename is None:
            return self._refuse("files", 400, "api.file.upload_file.app_error", "no file")
        info = self._file(given.filename, given.data, channel.text())
        self._uploads.append(dict(info))
        return Reply(201, {"file_infos": [info], "client_ids": []})

    def _download(self, request: TrackedHandler, raw: bytes, file: str) -> Reply:
        if file not in self._files:
            return self._refuse("download", 404, "app.file_info.get.app_error", "no file")
        self._downloads.append(file)
        return Reply(200, self._files[file][1], content_type=self._files[file][0]["mime_type"])


def main() -> None:
    serve_until_killed(FakeMattermost())


if __name__ == "__main__":
    main()
