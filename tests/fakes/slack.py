"""A fake Slack on 127.0.0.1: the Web API over HTTP and Socket Mode over a WebSocket,
both on one port, for the tests of the Slack adapter and the benches.

Web API: `POST {url}/api/<method>` (GET with a query string works too), with a JSON
or urlencoded body. The token comes as `Authorization: Bearer <token>` (a form or
query `token` parameter is taken too, except by apps.connections.open, as on
Slack). Every answer is JSON, HTTP 200 even for errors (`{"ok": false, "error":
"..."}`), except injected faults with another status and rate limits: 429,
`Retry-After: <seconds>`, `{"ok": false, "error": "ratelimited"}`. No token answers
`not_authed`, an unknown token `invalid_auth`, the app token (`xapp-`) to a bot
method or the bot token (`xoxb-`) to apps.connections.open
`not_allowed_token_type`, an unknown method `unknown_method`.

    auth.test              (bot) -> {"team_id": "T0001", "user_id": "UBOT",
                                     "bot_id": "B0001", "team": "Test", "user": "hermes"}
    apps.connections.open  (app) -> {"url": "ws://127.0.0.1:PORT/link/?ticket=...&app_id=A0001"}
    chat.postMessage       (bot; channel, text, thread_ts, mrkdwn, blocks ...)
                           -> {"channel", "ts", "message"}; "no_text" without text (nor
                              blocks or attachments), "msg_too_long" over 40,000
                              characters, "channel_not_found" without a channel,
                              "invalid_blocks" (with `errors`: what) for blocks past
                              Block Kit's limits: over 50 blocks, a section's text
                              over 3,000 characters, an actions block of over 25
                              elements, a button's label over 75 or value over 2,000,
                              an action_id repeated in its block or over 255
    chat.update            (bot; channel, ts, text, blocks ...)
                           -> {"channel", "ts", "text", "message"}: the message the bot
                              posted at `ts` in `channel` now has `text` (left out: kept)
                              and `blocks` (left out: kept; `[]`: removed), checked as
                              chat.postMessage checks them, and an `edited` field
                              ({"user": "UBOT", "ts": <a new ts>}). The same text again
                              is ok (Slack has no "not modified"). "message_not_found"
                              for a ts the bot never posted in that channel (or one
                              deleted), "cant_update_message" for a user's message,
                              "no_text" when neither text nor blocks would be left
    files.getUploadURLExternal (bot; filename, length, alt_txt, snippet_type)
                           -> {"upload_url": "{url}/upload/v1/<key>", "file_id": "F..."};
                              "invalid_arguments" (its `response_metadata.messages` say
                              what) for a filename or length missing or a length not a
                              whole number, "missing_argument" for a length of 0 (as
                              Slack's reference says), "file_too_large" over `max_upload`
                              bytes (default 1 GiB), "alt_txt_too_large" over 1,000
                              characters
    files.completeUploadExternal (bot; files: a JSON array (in a form, JSON text) of
                              {"id", "title"?}; channel_id, thread_ts, initial_comment)
                           -> {"files": [the file objects]}: every file completed (title
                              left out: the filename) and, with channel_id, shared there
                              (in thread_ts's thread): a message of the bot with `files`,
                              `upload: true`, `subtype: "file_share"` and `text` the
                              initial_comment (or ""), in `messages_in(channel)` before the
                              answer. Any channel id is taken, as chat.postMessage does.
                              "file_not_found" if a file is not uploaded and not completed
                              yet: an id never issued, its bytes not taken, or completed
                              already (a repeat completes and shares nothing again); none
                              of the files is completed then. "invalid_arguments" for
                              `files` missing, empty, not an array of {"id"} or naming a
                              file twice, and for thread_ts without channel_id;
                              "msg_too_long" for an initial_comment over 40,000 characters

Files, on the same port:

    GET {url}/files-pri/T0001-F00000001/<name>            (url_private)
    GET {url}/files-pri/T0001-F00000001/download/<name>   (url_private_download)
        With `Authorization: Bearer <bot token>`: 200, the file's `mimetype`, its bytes
        written in 256 KiB pieces (the download one with `Content-Disposition:
        attachment`), counted in `downloads` before the first byte. Without it (a wrong
        token, the app token) the answer is Slack's to a browser: 302 to
        `{url}/signin?redir=...`, whose page is 200 text/html. An unknown file id, or a
        name not the file's (percent-decoded), is a 404.
    POST {url}/upload/v1/<key>                            (an upload_url)
        The file's bytes as the raw body, or multipart/form-data (the part named `file`,
        else `filename`, else the first with a filename); chunked transfer encoding is
        taken. 200 text/plain `OK - <length>`; a body of another length than announced:
        400 `length mismatch` (nothing taken, the URL stays usable); a URL unknown or
        used already (it takes one upload): 404. The bytes need files.completeUploadExternal
        next; then the file is served as a user's is (if its bytes were kept: see below).

Socket Mode: each URL from apps.connections.open is single-use: a second handshake
with its ticket (or an unknown one) is refused with HTTP 401 before the upgrade.
On connect the fake sends `{"type": "hello", "num_connections": N, "connection_info":
{"app_id": "A0001"}, "debug_info": {...}}` and then envelopes:

    {"envelope_id": "<uuid>", "type": "events_api", "accepts_response_payload": false,
     "retry_attempt": 0, "retry_reason": "", "payload": {"team_id": "T0001",
     "api_app_id": "A0001", "event_id": "Ev...", "event_time": ..., "type":
     "event_callback", "event": {...}, "authorizations": [...]}}
    {"envelope_id": "<uuid>", "type": "slash_commands", "accepts_response_payload": true,
     "payload": {"command", "text", "user_id", "channel_id", "team_id", "trigger_id",
     "response_url", ...}}
    {"envelope_id": "<uuid>", "type": "interactive", "accepts_response_payload": false,
     "payload": {"type": "block_actions", "user": {"id", "username", "name", "team_id"},
     "team": {"id", "domain"}, "channel": {"id", "name"}, "container": {"type":
     "message", "message_ts", "channel_id", "is_ephemeral", "thread_ts"?}, "message":
     {"ts", "text", "blocks", "thread_ts"?, ...}, "actions": [{"action_id", "block_id",
     "text", "value", "type": "button", "action_ts"}], "trigger_id", "response_url",
     "api_app_id", "state", ...}}

A client acknowledges with a text frame `{"envelope_id": "..."}` (an optional
`payload` is recorded) on any socket. An events_api envelope not acknowledged within
`ack_timeout` seconds (default 3.0) comes again: the same payload and event_id, a new
envelope_id, `retry_attempt` + 1, `retry_reason: "timeout"`, on whichever socket the
routing picks then; after `max_retries` (3) unacknowledged retries the event is
dropped (`dropped`). A late acknowledgement of an earlier envelope of the event
still counts. Envelopes go to one open socket each, `routing` "round_robin"
(default), "newest" or "oldest"; a socket told to disconnect still gets them until
it closes. Events injected while no socket can take them wait, across client
restarts: the fake keeps its state for its whole life.

The test drives the fake from its own thread (every method is thread-safe):
`message()`, `mention()`, `slash()`, `inject()` and `envelope()` put events in;
`add_file(content, name, mimetype=None, *, size=, filetype=, user=)` puts a file a user
shared on Slack and returns its file object (`id`, `name`, `title`, `mimetype`,
`filetype`, `size`, `mode: "hosted"`, `user`, `url_private`, `url_private_download`,
`created`, `is_external: false`, ...), for `message(..., files=[...])` (the event then
has `files`, `upload: true`, `display_as_bot: false` and `subtype: "file_share"`; the
text may be empty) or `mention(..., files=[...])` (`files`, `upload: false`, no subtype,
as Slack sends an app_mention); `content` is kept, not copied;
`press(message, button, user=)` presses a button of a message the client posted (the
message's record in `sent`, or its ts; the button's value, i.e. hermes's command, or
its label) and returns the press's trigger_id; `redeliver(key)` sends an event once
more in a new envelope, acknowledged or not (a test of repeats);
`fail()` answers the next matching Web API calls with an error (on chat.update too:
`fail("chat.update", "edit_window_closed", channel=...)` for a workspace's edit window,
`fail("chat.update", "ratelimited", retry_after=5)` for a 429); `delete_message(ts)`
deletes a message as its channel's admin would (a later chat.update of it:
message_not_found); `disconnect()` sends a disconnect frame and closes the socket
later (warning / refresh_requested: after `disconnect_close_after` seconds, default
10; link_disabled: at once);
`half_open()` makes a socket silent both ways (nothing sent, nothing read: no
events, no pongs, no acks, no close replies) while its TCP connection stays up;
`drop()` cuts a socket. It reads what the client did in `sent` (a message's `blocks`
as posted among its parameters), `edits` (each chat.update taken: `channel`, `ts`,
`text`, `blocks` as given, None when left out, `at`), `refused`, `rate_limited` (how
many 429s the fake answered), `acked`, `acks`, `deliveries`, `sockets`, ...; what a
user sees now in a channel with `messages_in(channel)` (the bot's messages there, in
order, as Slack keeps them after edits: `ts`, `text`, `blocks`, `thread_ts`,
`edited`, `files`, ...); the files downloaded with the bot token in `downloads` (their
ids, a download each, in order); the uploads completed in `uploads` (`file_id`,
`filename`, `title`, `length`, `sha256` (hex), `alt_txt`, `snippet_type`, `channel`,
`thread_ts`, `initial_comment`, `ts` of the share message (None: not shared), `at`, and
`content`: the bytes, None over 1 MiB); and waits for it with the `wait_*` helpers
(`wait_acked(key)` for a press too, `wait_acks(count, event_id=key)` for a repeat's
acknowledgement, `wait_edits(count, ts=)` for edits, `wait_downloads(count,
file_id=)`, `wait_uploads(count, channel=)`), which block on a condition (no sleeping)
and raise TimeoutError naming what they waited for. `close()` returns at once.

Where the fake knowingly differs from Slack:
- `ws://` on 127.0.0.1, not `wss://`; no permessage-deflate; tickets never expire.
- After a `link_disabled` disconnect (Socket Mode turned off for the app; Slack's
  docs say reconnecting will not help, and document no error for it from
  apps.connections.open), apps.connections.open keeps answering ok, but every
  socket that connects is sent `disconnect` / `link_disabled` at once and closed
  (`enable_link()` ends that). A client that reconnects anyway shows in
  `connections_opened`.
- More than `max_connections` (10) open sockets: the newcomer gets a
  `too_many_websockets` disconnect instead of hello, and is closed.
- Sockets the fake closes get a close frame with code 1001; a cut (`drop()`) has
  none. The fake sends no pings of its own; it answers the client's.
- Slash commands, button presses (and `envelope()`s) are not retried:
  unacknowledged after `ack_timeout`, they are dropped (Slack shows the user a
  timeout). Their envelopes carry no retry fields; their key in `acked` is the
  trigger_id. A press's `action_ts` is a fake ts, unique in the fake's life; a
  block posted without a block_id gets one (`fk<n>`) in the message Slack keeps
  (the `message` of chat.postMessage's answer and of a press), not in `sent`.
- chat.postMessage takes any channel id (a user id is not turned into a DM id) and
  any thread_ts; `response_url` points at `{url}/_slack/response/<trigger_id>`,
  which records the POSTs in `responses`.
- `echo_bot_messages=True` makes every message posted come back as a `message`
  event with `bot_id`, and every update as a `message_changed` one (Slack does so for
  the channels the app listens to); off by default.
- chat.update without `blocks` keeps the message's blocks, as Slack's reference has
  long said ("To remove previous blocks, include an empty array"); a later wording
  says a `text` without `blocks` removes them. A client that sends `blocks` (`[]` to
  remove them) gets the same message from both. Every update adds `edited`; Slack
  does not show the mark on a message rendered from blocks. There is no edit window
  unless one is injected (`fail`), and no rate limit unless one is injected.
- Files are served on 127.0.0.1 under the fake's URL, not files.slack.com; upload URLs
  never expire, and an upload is taken at once (no processing job). A file given a
  `size` larger than its content is served as the content, then zero bytes up to
  `size`. The bytes of an upload over 1 MiB are not kept once it is completed: its
  download answers 404.
- files.getUploadURLExternal's "file_too_large" past `max_upload` is the fake's word:
  Slack's reference names file_upload_size_restricted for a workspace's own limit and
  nothing for its 1 GiB. What Slack answers to a repeat completion is not documented:
  the fake says file_not_found. files.completeUploadExternal takes `channel_id`, not
  `channels` (refused: invalid_arguments) and ignores `blocks`.

In its own process:

    python -m tests.fakes.slack [--bot-token xoxb-...] [--app-token xapp-...]

prints its base URL on one line and serves until killed. Another process drives it
over HTTP: `POST {url}/_fake/<name>` with a JSON object of keyword arguments calls one
of message, mention, slash, inject, envelope, press, redeliver, fail, clear_faults,
delete_message, messages_in, disconnect, half_open, drop, disable_link, enable_link,
configure, add_file (its `content` as text, taken as UTF-8) (answer `{"ok": true,
"result": <return value>}`), and `GET {url}/_fake/state` answers the counters and the
records (an upload's bytes as base64 text, `content_base64`).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import mimetypes
import secrets
import threading
import time
import traceback
import uuid
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import attrs

from tests.fakes.kit import observed, serve_until_killed
from tests.fakes.local_http import (
    Blob,
    BodyError,
    ErrorShape,
    Reply,
    TrackedHandler,
    bearer,
    copy_json,
    decode_body,
    decode_object,
    form_parts,
    media_type,
    query,
    routes,
)
from tests.fakes.websocket import WebSocket, WebSocketFake

TEAM_ID = "T0001"
TEAM_NAME = "Test"
TEAM_DOMAIN = "test"
BOT_USER_ID = "UBOT"
BOT_ID = "B0001"
BOT_NAME = "hermes"
APP_ID = "A0001"
BOT_TOKEN = "xoxb-0001-0001-fake-bot-token"
APP_TOKEN = "xapp-1-A0001-0001-fake-app-token"
MAX_TEXT = 40_000
MAX_CONNECTIONS = 10  # Slack's limit of open Socket Mode connections per app
DISCONNECT_REASONS = frozenset({"warning", "refresh_requested", "link_disabled"})
ROUTINGS = frozenset({"round_robin", "newest", "oldest"})
CLOSE_CODE = 1001  # the code of the close frames the fake sends
_DEFAULT_CHANNELS = {"im": "D1", "channel": "C1", "group": "G1", "mpim": "G2"}
_CHANNEL_TYPES = {"D": "im", "C": "channel", "G": "group"}
_BOT_METHODS = frozenset({
    "auth.test", "chat.postMessage", "chat.update", "files.getUploadURLExternal",
    "files.completeUploadExternal",
})  # fmt: skip
MAX_UPLOAD = 1 << 30  # 1 GiB: Slack's limit on a file's size
MAX_KEPT = 1 << 20  # an upload's bytes kept (in `uploads`, and served) up to 1 MiB
MAX_ALT_TXT = 1000
_FILETYPES = {"jpeg": "jpg", "txt": "text", "md": "markdown", "htm": "html", "yml": "yaml"}
_SIGNIN_PAGE = b"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in | Slack</title></head>
<body><h1>Sign in to Test</h1><form method="post" action="/signin">
<input type="email" name="email"><input type="password" name="password">
<button type="submit">Sign In</button></form></body></html>
"""
MAX_BLOCKS = 50  # Block Kit's limits, as chat.postMessage checks them
MAX_SECTION_TEXT = 3000
MAX_ELEMENTS = 25  # of an actions block
MAX_BUTTON_LABEL = 75
MAX_BUTTON_VALUE = 2000
MAX_ID = 255  # a block_id, an action_id
_WS_REFUSALS = {
    "websocket upgrade required": "websocket_upgrade_required",
    "stopping": "service_unavailable",
    "bad websocket handshake": "bad_websocket_handshake",
}


@attrs.define(eq=False)
class _Event:
    key: str  # event_id (events_api), trigger_id (slash_commands) or a made-up key
    kind: str  # the envelope type
    payload: dict[str, Any]
    accepts_response_payload: bool
    seq: int
    delivered: int = 0  # envelopes sent so far
    state: str = "queued"  # queued | in_flight | acked | dropped
    retry_reason: str = ""
    deadline: float = 0.0


@attrs.define(eq=False, kw_only=True)
class _Socket(WebSocket):
    close_code: int = CLOSE_CODE
    close_reason: str = "disconnected"
    accepting: bool = True  # False: refused at connect (link disabled, too many)
    close_at: float | None = None  # a scheduled close (after a disconnect frame)
    disconnects: list[str] = attrs.Factory(list)

    def info(self) -> dict[str, Any]:
        return {
            **super().info(), "half_open": self.half_open, "disconnects": list(self.disconnects),
            "pings": self.pings, "ignored_bytes": self.ignored_bytes,
        }  # fmt: skip


def _ok(**fields: Any) -> Reply:
    return Reply(200, {"ok": True, **fields})


_ERRORS = ErrorShape("error", fixed={"ok": False})


def _error(error: str, status: int = 200, retry_after: float | None = None) -> Reply:
    return _ERRORS.reply(status, error, retry_after=retry_after)


def _text(status: int, text: str) -> Reply:
    """An answer of the file servers (upload, download): plain text, not JSON."""
    return Reply(status, text.encode(), content_type="text/plain; charset=utf-8")


@attrs.define(eq=False, kw_only=True)
class _File:
    """A file on Slack: shared by a user (`add_file`) or uploaded by the bot."""

    id: str
    name: str
    title: str
    mimetype: str
    filetype: str
    size: int  # as Slack tells it; served: `content`, then zeros up to it
    user: str
    created: int
    content: bytes | None  # None: not kept (an upload over MAX_KEPT)
    alt_txt: str | None = None

    def info(self, base: str) -> dict[str, Any]:
        """The file object, as in a message's `files` (`base`: the fake's URL)."""
        quoted = quote(self.name, safe="")
        where = f"{base}/files-pri/{TEAM_ID}-{self.id}"
        info: dict[str, Any] = {
            "id": self.id, "created": self.created, "timestamp": self.created,
            "name": self.name, "title": self.title, "mimetype": self.mimetype,
            "filetype": self.filetype, "pretty_type": self.filetype.upper(),
            "user": self.user, "user_team": TEAM_ID, "editable": False, "size": self.size,
            "mode": "hosted", "is_external": False, "external_type": "", "is_public": False,
            "public_url_shared": False, "display_as_bot": False, "username": "",
            "url_private": f"{where}/{quoted}",
            "url_private_download": f"{where}/download/{quoted}",
            "permalink": f"https://{TEAM_DOMAIN}.slack.com/files/{self.user}/{self.id}/{quoted}",
            "permalink_public": f"https://slack-files.com/{TEAM_ID}-{self.id}-{self.id.lower()}",
            "has_rich_preview": False, "file_access": "visible",
        }  # fmt: skip
        if self.alt_txt is not None:
            info["alt_txt"] = self.alt_txt
        return info


@attrs.define(eq=False, kw_only=True)
class _Upload:
    """A file the bot is uploading (files.getUploadURLExternal), until completed."""

    file_id: str
    key: str  # the upload URL's last segment
    filename: str
    length: int  # announced
    alt_txt: str | None
    snippet_type: str | None
    state: str = "issued"  # issued | uploaded | completed
    content: bytes | None = None  # from the upload to the completion
    sha256: str = ""


class _FilesHandler(TrackedHandler):
    """The fake's request handler with the file servers' way: a POST's body may come
    chunked (an upload streamed); the rest as every fake's does."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        if "chunked" not in str(self.headers.get("transfer-encoding", "")).lower():
            super().do_POST()
            return
        pieces: list[bytes] = []
        try:
            while True:
                size = int(self.rfile.readline(1024).split(b";")[0].strip(), 16)
                if size == 0:
                    break
                piece = self.rfile.read(size)
                if len(piece) != size or self.rfile.read(2) != b"\r\n":
                    raise ValueError("a chunk cut short")
                pieces.append(piece)
            while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                pass  # trailers
        except (OSError, ValueError):
            self.close_connection = True
            return
        self._serve(b"".join(pieces))


class FakeSlack(WebSocketFake):
    """Slack's Web API over HTTP and Socket Mode over a WebSocket, as the module's
    docstring tells."""

    name = "Slack"
    _ROUTES = routes(
        ("POST", "/_slack/response/{trigger_id}", "_response_url"),
        ("GET", "/files-pri{file_path*}", "_serve_file"),
        ("GET", "/signin", "_signin"),
        ("POST", "/upload/v1/{key}", "_take_upload"),
        ("*", "/api/{method}", "_web_api"),
    )
    _json_type = "application/json; charset=utf-8"
    _socket_class = _Socket
    _socket_paths = frozenset({"/link"})
    _CONTROLS = frozenset({
        "message", "mention", "slash", "inject", "envelope", "press", "redeliver", "fail",
        "clear_faults", "delete_message", "messages_in", "disconnect", "half_open", "drop",
        "disable_link", "enable_link", "configure", "add_file",
    })  # fmt: skip
    _STATE = (
        "sent", "edits", "refused", "rate_limited", "acked", "acks", "deliveries", "dropped",
        "pending", "sockets", "connections_opened", "connection_urls", "open_sockets",
        "max_open_sockets", "responses", "downloads", "uploads", "internal_errors",
    )  # fmt: skip

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        ack_timeout: float = 3.0,
        disconnect_close_after: float = 10.0,
        max_retries: int = 3,
        routing: str = "round_robin",
        max_connections: int = MAX_CONNECTIONS,
        echo_bot_messages: bool = False,
        max_upload: int = MAX_UPLOAD,
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {sorted(ROUTINGS)}")
        super().__init__()
        handler = self.server.RequestHandlerClass
        self.server.RequestHandlerClass = type("Handler", (_FilesHandler, handler), {})
        self.bot_token = bot_token
        self.app_token = app_token
        self.ack_timeout = ack_timeout
        self.disconnect_close_after = disconnect_close_after
        self.max_retries = max_retries
        self.routing = routing
        self.max_connections = max_connections
        self.echo_bot_messages = echo_bot_messages
        self.max_upload = max_upload  # bytes files.getUploadURLExternal takes
        # Socket Mode
        self._tickets: set[str] = set()
        self._urls_issued = 0
        self._rejected: list[dict[str, Any]] = []  # handshakes refused (bad tickets)
        self._max_open = 0
        self._rr = 0
        self._link_disabled = False
        # events
        self._seq = itertools.count(1)
        self._event_numbers = itertools.count(1)
        self._ts = 1_700_000_000_000_000  # microseconds; each new ts is 100 later
        self._events: dict[str, _Event] = {}
        self._queue: list[_Event] = []
        self._by_envelope: dict[str, _Event] = {}
        self._deliveries: list[dict[str, Any]] = []
        self._acks: list[dict[str, Any]] = []
        self._acked: list[str] = []
        self._dropped: list[str] = []
        # Web API
        self._messages: dict[str, dict[str, Any]] = {}  # by ts: posted, as Slack keeps them
        self._others: dict[str, str] = {}  # ts -> channel of the users' messages injected
        self._edits: list[dict[str, Any]] = []
        self._block_ids = itertools.count(1)
        self._calls: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._responses: list[dict[str, Any]] = []
        # files
        self._file_numbers = itertools.count(1)
        self._files: dict[str, _File] = {}  # by id: what the file URLs serve
        self._pending_uploads: dict[str, _Upload] = {}  # by file id
        self._upload_urls: dict[str, _Upload] = {}  # by key: the URLs not used yet
        self._downloads: list[str] = []  # file ids, a download each
        self._uploads: list[dict[str, Any]] = []
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """`{url}/api`: append `/auth.test` and so on."""
        return f"{self.url}/api"

    def __enter__(self) -> FakeSlack:
        super().__enter__()
        self._pump_thread.start()
        return self

    def close(self) -> None:
        """Stop serving: every connection (HTTP and WebSocket) is shut at once, and
        nothing is waited for."""
        self._stop()

    def _stop(self) -> None:
        super()._stop()
        if self._pump_thread.is_alive():
            self._pump_thread.join(1)

    def configure(
        self,
        *,
        ack_timeout: float | None = None,
        disconnect_close_after: float | None = None,
        max_retries: int | None = None,
        routing: str | None = None,
        max_connections: int | None = None,
        echo_bot_messages: bool | None = None,
        max_upload: int | None = None,
    ) -> None:
        """Change settings (those not given stay); they apply to what happens next (an
        envelope already out keeps its deadline). The attributes may be set directly too."""
        if routing is not None and routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {sorted(ROUTINGS)}")
        with self._cond:
            if ack_timeout is not None:
                self.ack_timeout = float(ack_timeout)
            if disconnect_close_after is not None:
                self.disconnect_close_after = float(disconnect_close_after)
            if max_retries is not None:
                self.max_retries = int(max_retries)
            if routing is not None:
                self.routing = routing
            if max_connections is not None:
                self.max_connections = int(max_connections)
            if echo_bot_messages is not None:
                self.echo_bot_messages = bool(echo_bot_messages)
            if max_upload is not None:
                self.max_upload = int(max_upload)
            self._cond.notify_all()

    # -- injecting events -----------------------------------------------------------------

    def message(
        self,
        text: str,
        *,
        user: str = "U1",
        channel: str | None = None,
        channel_type: str = "im",
        thread_ts: str | None = None,
        team: str = TEAM_ID,
        bot_id: str | None = None,
        subtype: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """A `message` event (a new, increasing `ts`) in `channel` (default by
        `channel_type`: im D1, channel C1, group G1, mpim G2); returns its event_id.
        With `files` (file objects, as `add_file` returns them) it is a user's message
        with files, as Slack sends one: `files`, `upload: true`, `display_as_bot: false`
        and `subtype` "file_share" (unless another is given); `text` may be empty."""
        if channel_type not in _DEFAULT_CHANNELS:
            raise ValueError(f"channel_type must be one of {sorted(_DEFAULT_CHANNELS)}")
        if files is not None and subtype is None:
            subtype = "file_share"
        with self._cond:
            ts = self._next_ts()
            event: dict[str, Any] = {
                "type": "message", "user": user, "text": text, "ts": ts, "event_ts": ts,
                "channel": channel or _DEFAULT_CHANNELS[channel_type],
                "channel_type": channel_type, "team": team,
            }  # fmt: skip
            if bot_id is None:
                event["client_msg_id"] = str(uuid.uuid4())
            else:
                event["bot_id"] = bot_id
                event["app_id"] = APP_ID if bot_id == BOT_ID else "A9999"
            if files is not None:
                event.update(files=copy_json(files), upload=True, display_as_bot=False)
            if subtype is not None:
                event["subtype"] = subtype
            if thread_ts is not None:
                event["thread_ts"] = thread_ts
            if bot_id != BOT_ID:
                self._others[ts] = event["channel"]
            return self._add_event(event, team)

    def mention(
        self,
        text: str,
        *,
        user: str = "U1",
        channel: str = "C1",
        thread_ts: str | None = None,
        team: str = TEAM_ID,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """An `app_mention` event; `<@UBOT> ` is put before `text` unless it mentions
        the bot already. Returns its event_id. With `files` (file objects, as `add_file`
        returns them) the event carries them as Slack's app_mention does: `files`,
        `upload: false`, `display_as_bot: false`, no subtype."""
        mention = f"<@{BOT_USER_ID}>"
        if mention not in text:
            text = f"{mention} {text}"
        with self._cond:
            ts = self._next_ts()
            event: dict[str, Any] = {
                "type": "app_mention", "user": user, "text": text, "ts": ts,
                "client_msg_id": str(uuid.uuid4()), "team": team, "channel": channel,
                "event_ts": ts,
            }  # fmt: skip
            if files is not None:
                event.update(files=copy_json(files), upload=False, display_as_bot=False)
            if thread_ts is not None:
                event["thread_ts"] = thread_ts
            self._others[ts] = channel
            return self._add_event(event, team)

    def add_file(
        self,
        content: bytes | str,
        name: str,
        mimetype: str | None = None,
        *,
        size: int | None = None,
        filetype: str | None = None,
        user: str = "U1",
    ) -> dict[str, Any]:
        """A file `user` shared on Slack; returns its file object (for `message(...,
        files=[...])`): `id` ("F" and a number), `name`, `title` (the name), `mimetype`
        (guessed from the name when None), `filetype` (from the name's extension when
        None), `size`, `mode` "hosted", `user`, `url_private`, `url_private_download`,
        `created`, `is_external` false, ... Its URLs serve `content` (kept as it is, not
        copied; a str is taken as UTF-8, for another process) and then, when `size` is
        given larger than it, zero bytes up to `size`: a big file without its bytes."""
        data = content.encode() if isinstance(content, str) else content
        if not isinstance(data, bytes):
            data = bytes(data)
        if size is None:
            size = len(data)
        if size < len(data):
            raise ValueError(f"size {size} is less than the content's {len(data)} bytes")
        if not name:
            raise ValueError("a file needs a name")
        mimetype = mimetype or _guess_mimetype(name)
        with self._cond:
            file = _File(
                id=self._next_file_id(), name=name, title=name, mimetype=mimetype,
                filetype=filetype or _filetype(name, mimetype), size=size, user=user,
                created=int(time.time()), content=data,
            )  # fmt: skip
            self._files[file.id] = file
            self._cond.notify_all()
            return file.info(self.url)

    def slash(
        self,
        command: str = "/hermes",
        text: str = "status",
        *,
        user: str = "U1",
        channel: str = "D1",
        team: str = TEAM_ID,
    ) -> str:
        """A slash command (envelope type `slash_commands`); returns its trigger_id."""
        with self._cond:
            n = next(self._event_numbers)
            trigger_id = f"{n}.{n:04d}.{uuid.uuid4().hex[:32]}"
            payload = {
                "token": "fake-verification-token", "team_id": team,
                "team_domain": TEAM_DOMAIN, "channel_id": channel,
                "channel_name": "directmessage" if channel.startswith("D") else "general",
                "user_id": user, "user_name": user.lower(), "command": command,
                "text": text, "api_app_id": APP_ID, "is_enterprise_install": "false",
                "response_url": f"{self.url}/_slack/response/{trigger_id}",
                "trigger_id": trigger_id,
            }  # fmt: skip
            return self._add(trigger_id, "slash_commands", payload, True)

    def inject(self, event: dict[str, Any], *, team: str = TEAM_ID) -> str:
        """Any other Events API event (`event` is the inner event: {"type": ...}),
        wrapped in an event_callback; returns its event_id."""
        with self._cond:
            return self._add_event(copy_json(event), team)

    def envelope(
        self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool = True
    ) -> str:
        """An envelope of any type (`interactive` ...) with `payload` as given; not
        retried. Returns its key (the payload's trigger_id if any)."""
        with self._cond:
            n = next(self._event_numbers)
            key = str(payload.get("trigger_id") or f"Env{n:08d}")
            return self._add(key, kind, copy_json(payload), accepts_response_payload)

    def payload(self, key: str) -> dict[str, Any]:
        """The payload of an event injected earlier (event_id or trigger_id), as sent."""
        with self._cond:
            return copy_json(self._events[key].payload)

    def press(
        self, message: dict[str, Any] | str, button: str, *, user: str = "U1", team: str = TEAM_ID
    ) -> str:
        """`user` presses a button of a message the client posted: `message` is its record
        in `sent` (or its ts), `button` the button's value (hermes puts the command there)
        or its label. An `interactive` envelope with a `block_actions` payload goes out,
        not retried (see the module's docstring). Returns its trigger_id, its key in
        `acked`, `deliveries` and `payload()`."""
        ts = message if isinstance(message, str) else str(message.get("ts") or "")
        with self._cond:
            posted = self._messages.get(ts)
            if posted is None:
                raise LookupError(f"no message with ts {ts!r} was posted")
            block_id, element = _button(posted, button)
            n = next(self._event_numbers)
            trigger_id = f"{n}.{n:04d}.{uuid.uuid4().hex[:32]}"
            channel = posted["channel"]
            shown = {k: v for k, v in posted.items() if k != "channel"}
            container = {"type": "message", "message_ts": ts, "channel_id": channel,
                         "is_ephemeral": False}  # fmt: skip
            if "thread_ts" in posted:
                container["thread_ts"] = posted["thread_ts"]
            payload = {
                "type": "block_actions",
                "user": {"id": user, "username": user.lower(), "name": user.lower(),
                         "team_id": team},
                "api_app_id": APP_ID, "token": "fake-verification-token",
                "container": container, "trigger_id": trigger_id,
                "team": {"id": team, "domain": TEAM_DOMAIN}, "enterprise": None,
                "is_enterprise_install": False,
                "channel": {"id": channel,
                            "name": "directmessage" if channel.startswith("D") else "general"},
                "message": copy_json(shown), "state": {"values": {}},
                "response_url": f"{self.url}/_slack/response/{trigger_id}",
                "actions": [{
                    "action_id": element.get("action_id"), "block_id": block_id,
                    "text": copy_json(element.get("text")), "value": element.get("value"),
                    "type": "button", "action_ts": self._next_ts(),
                }],
            }  # fmt: skip
            return self._add(trigger_id, "interactive", payload, False)

    def redeliver(self, key: str) -> None:
        """Send an event (`key`: an event_id, a trigger_id) once more at once, in a new
        envelope with the same payload, whether it was acknowledged or not: for a test
        that a client knows a repeat. An events_api event comes as a retry
        (`retry_attempt` + 1, `retry_reason` "timeout")."""
        with self._cond:
            event = self._events[key]
            if event.state != "queued":
                event.state, event.retry_reason = "queued", "timeout"
                self._queue.append(event)
                self._cond.notify_all()

    def delete_message(self, ts: str) -> None:
        """The message the bot posted at `ts` is deleted (by a channel's admin): it is
        no longer shown, and a chat.update of it answers message_not_found."""
        with self._cond:
            if self._messages.pop(ts, None) is None:
                raise LookupError(f"no message with ts {ts!r} is shown")
            self._cond.notify_all()

    # -- faults and socket trouble ----------------------------------------------------------

    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        retry_after: float | None = None,
        channel: str | None = None,
        times: int | None = 1,
    ) -> None:
        """The next `times` calls of `method` (as Slack spells it, "*": any; only those
        to `channel` if given, a completion's channel_id too; `times=None`: all from now
        on) answer `{"ok": false, "error": error}` with `status`. "ratelimited" (or
        status 429) answers 429 with `Retry-After` (default 1 s). Faults queue: each call
        takes the first match."""
        if error == "ratelimited" and status == 200:
            status = 429
        if status == 429 and retry_after is None:
            retry_after = 1
        with self._cond:
            self._faults.add(_error(error, status, retry_after), method, channel, times)

    def disconnect(
        self,
        reason: str = "warning",
        socket: int | None = None,
        *,
        close_after: float | None = None,
    ) -> int:
        """Send `{"type": "disconnect", "reason": reason}` to `socket` (an id from
        `sockets`; default the oldest open one not half-open) and close it
        `close_after` seconds later (default `disconnect_close_after`; link_disabled:
        at once). link_disabled without a socket goes to every open socket and
        disables the link (see the module's docstring). Returns the socket's id."""
        if reason not in DISCONNECT_REASONS:
            raise ValueError(f"reason must be one of {sorted(DISCONNECT_REASONS)}")
        with self._cond:
            target = self._pick_socket(socket, live=True)
            if reason == "link_disabled":
                self._link_disabled = True
                close_after = 0.0
            elif close_after is None:
                close_after = self.disconnect_close_after
            targets = [target]
            if reason == "link_disabled" and socket is None:
                targets = [s for s in self._sockets if s.closed_at is None]
            for sock in targets:
                sock.disconnects.append(reason)
                sock.outbox.append((json.dumps(self._disconnect_frame(reason)), None))
                sock.accepting = sock.accepting and reason != "link_disabled"
                when = time.monotonic() + close_after
                sock.close_at = when if sock.close_at is None else min(sock.close_at, when)
            self._cond.notify_all()
            return target.id

    def half_open(self, socket: int | None = None) -> int:
        """`socket` (default the oldest open one) goes silent both ways while its TCP
        connection stays: the fake sends nothing on it (no events, no pongs, no close
        replies) and reads nothing from it (acks are lost). Envelopes go to other
        sockets, or wait; those already sent on it come again after `ack_timeout`.
        Returns the socket's id. There is no way back: the client must replace it."""
        with self._cond:
            sock = self._pick_socket(socket, live=True)
            sock.half_open = True
            self._cond.notify_all()
            return sock.id

    def drop(self, socket: int | None = None, *, clean: bool = False) -> int:
        """Close `socket` (default the oldest open one) now: cut the TCP connection, or
        with `clean`, send a close frame (1001) first. Returns the socket's id."""
        with self._cond:
            sock = self._pick_socket(socket, live=False)
            sock.close_now = True
            sock.cut = not clean
            self._cond.notify_all()
            return sock.id

    def disable_link(self) -> None:
        """Socket Mode is off: sockets connecting from now on get a link_disabled
        disconnect at once (open ones are left alone: see `disconnect`)."""
        self._change(_link_disabled=True)

    def enable_link(self) -> None:
        """Socket Mode is on again: new sockets get hello and events."""
        self._change(_link_disabled=False)

    # -- observing ----------------------------------------------------------------------

    sent = observed("_sent", """The chat.postMessage calls taken, in order: their
        parameters (the token left out), `channel`, `ts` and `at` (time.monotonic() of
        arrival).""")  # fmt: skip
    edits = observed("_edits", """The chat.update calls taken, in order: `channel`, `ts`
        (the message's), `text` and `blocks` as given (None: left out), `at`
        (time.monotonic() of arrival).""")  # fmt: skip
    refused = observed("_refused", """Every Web API call answered ok: false, in order:
        `method`, `params`, `channel`, `error`, `status`, `retry_after`, `at`.""")  # fmt: skip
    rate_limited = observed("_refused", "How many calls the fake answered with a 429.",
                            lambda refused: sum(r["status"] == 429 for r in refused))  # fmt: skip
    calls = observed("_calls", """Every Web API call: `method`, `params`, `token` ("bot" |
        "app" | "wrong" | None), `status`, `ok`, `error`, `at`.""")  # fmt: skip
    responses = observed("_responses", """POSTs to a slash command's response_url:
        `trigger_id`, `body`, `at`.""")  # fmt: skip
    acked = observed("_acked", """The keys (event_id, trigger_id) of the events
        acknowledged, in order, once each.""")  # fmt: skip
    acks = observed("_acks", """Every acknowledgement frame: `envelope_id`, `event_id`
        (None: unknown envelope), `socket`, `payload` (None if none), `at`.""")  # fmt: skip
    deliveries = observed("_deliveries", """Every envelope sent (or meant for a socket
        that went silent): `envelope_id`, `event_id` (the key), `type`, `retry_attempt`,
        `retry_reason`, `socket`, `at`, `written` (whether it went out on the
        wire).""")  # fmt: skip
    dropped = observed("_dropped", """Keys of the events given up on (retries exhausted,
        slash commands timed out).""")  # fmt: skip
    connection_urls = observed("_urls_issued", "URLs handed out by apps.connections.open.")
    rejected_connections = observed("_rejected", """Handshakes refused for a used or
        unknown ticket: `ticket`, `at`.""")  # fmt: skip
    max_open_sockets = observed("_max_open", "The most sockets open at once in the fake's life.")
    downloads = observed("_downloads", """The ids of the files downloaded with the bot token,
        a download each, in order (counted before the first byte is written).""")  # fmt: skip
    uploads = observed("_uploads", """The files the bot uploaded and completed
        (files.completeUploadExternal), in order: `file_id`, `filename`, `title`, `length`,
        `sha256` (hex), `alt_txt`, `snippet_type`, `channel`, `thread_ts`,
        `initial_comment` (None: not given), `ts` (of the share message; None: not
        shared), `at` (time.monotonic() of the completion) and `content` (the bytes, None
        over 1 MiB).""")  # fmt: skip

    pending = observed("_queue", """Keys of the events waiting for a socket (new ones and
        retries due).""", lambda queue: [e.key for e in queue])  # fmt: skip
    connections_opened = observed("_sockets", "WebSocket handshakes completed in the fake's life.",
                                  len)  # fmt: skip

    # `sent_to(channel)` and `wait_sent(count, timeout, channel=)`: the kit's. The sockets
    # (`sockets`: `id`, `opened_at`, `closed_at`, `open`, `half_open`, `disconnects`
    # (reasons sent), `closed_by` ("fake", "client": a close frame, "eof"),
    # `client_close_code`, `pings`, `frames_in`, `ignored_bytes`), `open_sockets`,
    # `wait_connections` and `wait_open_sockets` are the WebSocket kit's.

    def messages_in(self, channel: str) -> list[dict[str, Any]]:
        """What a user sees in `channel` now: the bot's messages there (threads' replies
        included), in order, each as Slack keeps it after its edits (`ts`, `text`,
        `blocks` if any, `thread_ts` if any, `edited` if edited, ...); deleted ones
        left out."""
        with self._cond:
            return copy_json([
                {k: v for k, v in m.items() if k != "channel"}
                for m in self._messages.values() if m["channel"] == channel
            ])  # fmt: skip

    def wait_edits(
        self, count: int = 1, timeout: float = 10.0, *, ts: str | None = None
    ) -> list[dict[str, Any]]:
        """The edits taken (of the message at `ts` if given), once at least `count` were."""
        of = "" if ts is None else f" of {ts}"
        return self._wait_records("_edits", count, timeout, f"{count} edit(s){of}",
                                  lambda e: ts in (None, e["ts"]))  # fmt: skip

    def wait_downloads(
        self, count: int = 1, timeout: float = 10.0, *, file_id: str | None = None
    ) -> list[str]:
        """The file ids downloaded (only `file_id`'s if given), once at least `count`
        downloads were."""
        what = f"{count} download(s) of {file_id or 'a file'}"
        return self._wait_records("_downloads", count, timeout, what,
                                  lambda f: file_id in (None, f))  # fmt: skip

    def wait_uploads(
        self, count: int = 1, timeout: float = 10.0, *, channel: str | None = None
    ) -> list[dict[str, Any]]:
        """The uploads completed (shared in `channel` if given), once at least `count`
        were."""
        where = "" if channel is None else f" shared in {channel}"
        return self._wait_records("_uploads", count, timeout, f"{count} upload(s){where}",
                                  lambda u: channel in (None, u["channel"]))  # fmt: skip

    def wait_refused(
        self, count: int = 1, timeout: float = 10.0, *, method: str | None = None
    ) -> list[dict[str, Any]]:
        """The calls answered with an error (of `method` if given), once `count` were."""
        what = f"{count} refused {method or 'Web API'} call(s)"
        return self._wait_records("_refused", count, timeout, what,
                                  lambda r: method in (None, r["method"]))  # fmt: skip

    def wait_acked(self, what: int | str = 1, timeout: float = 10.0) -> list[str]:
        """Until `what` (an event_id / trigger_id) is acknowledged, or (an int) that
        many events are; returns `acked`."""
        if isinstance(what, str):
            self._wait(lambda: what in self._acked, timeout, f"acknowledgement of {what}")
        else:
            self._wait(lambda: len(self._acked) >= what, timeout, f"{what} acknowledged event(s)")
        return self.acked

    def wait_acks(
        self, count: int = 1, timeout: float = 10.0, *, event_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The acknowledgement frames (of `event_id`'s envelopes if given), once at least
        `count` came: a repeat's included (`acked` names an event once)."""
        of = "" if event_id is None else f" of {event_id}"
        return self._wait_records("_acks", count, timeout, f"{count} acknowledgement(s){of}",
                                  lambda a: event_id in (None, a["event_id"]))  # fmt: skip

    def wait_deliveries(
        self, count: int = 1, timeout: float = 10.0, *, event_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The envelopes sent (of `event_id` if given), once at least `count` were."""
        of = "" if event_id is None else f" of {event_id}"
        return self._wait_records("_deliveries", count, timeout, f"{count} envelope(s){of} sent",
                                  lambda d: event_id in (None, d["event_id"]))  # fmt: skip

    # -- internals of injection (called holding the lock) ---------------------------------

    def _next_file_id(self) -> str:
        return f"F{next(self._file_numbers):08d}"

    def _next_ts(self) -> str:
        self._ts += 100
        return f"{self._ts // 1_000_000}.{self._ts % 1_000_000:06d}"

    def _add_event(self, event: dict[str, Any], team: str) -> str:
        event_id = f"Ev{next(self._event_numbers):08d}"
        payload = {
            "token": "fake-verification-token", "team_id": team, "context_team_id": team,
            "api_app_id": APP_ID, "event": event, "type": "event_callback",
            "event_id": event_id, "event_time": int(time.time()),
            "authorizations": [{
                "enterprise_id": None, "team_id": team, "user_id": BOT_USER_ID,
                "is_bot": True, "is_enterprise_install": False,
            }],
            "is_ext_shared_channel": False,
        }  # fmt: skip
        return self._add(event_id, "events_api", payload, False)

    def _add(self, key: str, kind: str, payload: dict[str, Any], accepts: bool) -> str:
        if key in self._events:
            raise ValueError(f"an event {key!r} exists already")
        event = _Event(key, kind, payload, accepts, next(self._seq))
        self._events[key] = event
        self._queue.append(event)
        self._cond.notify_all()
        return key

    def _pick_socket(self, socket_id: int | None, *, live: bool) -> _Socket:
        open_ = [s for s in self._sockets if s.closed_at is None]
        if socket_id is not None:
            for sock in open_:
                if sock.id == socket_id:
                    return sock
            raise LookupError(f"no open socket {socket_id}")
        candidates = [s for s in open_ if not (live and s.half_open)]
        if not candidates:
            raise LookupError("no open socket")
        return candidates[0]

    def _disconnect_frame(self, reason: str) -> dict[str, Any]:
        return {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake-1"}}

    # -- the pump: deliveries, retries, scheduled closes ------------------------------------

    def _pump(self) -> None:
        with self._cond:
            while not self._closing:
                try:
                    wake = self._pump_once(time.monotonic())
                except Exception:  # a bug of the fake: record, keep pumping
                    self._internal_errors.append(traceback.format_exc())
                    self._cond.notify_all()
                    wake = time.monotonic() + 0.1
                timeout = None if wake is None else max(0.0, wake - time.monotonic())
                self._cond.wait(timeout)

    def _pump_once(self, now: float) -> float | None:
        """One round (holding the lock); returns when the next one is due (None: on a
        change)."""
        changed = False
        for event in self._events.values():
            if event.state != "in_flight" or event.deadline > now:
                continue
            changed = True
            if event.kind == "events_api" and event.delivered <= self.max_retries:
                event.state, event.retry_reason = "queued", "timeout"
                self._queue.append(event)
            else:
                event.state = "dropped"
                self._dropped.append(event.key)
        self._queue.sort(key=lambda e: e.seq)
        for sock in self._sockets:
            if sock.closed_at is None and sock.close_at is not None and sock.close_at <= now:
                if not sock.close_now:
                    sock.close_now, changed = True, True
        while self._queue:
            live = [
                s for s in self._sockets
                if s.closed_at is None and s.accepting and not s.half_open and not s.close_now
            ]  # fmt: skip
            if not live:
                break
            if self.routing == "newest":
                sock = live[-1]
            elif self.routing == "oldest":
                sock = live[0]
            else:
                sock = live[self._rr % len(live)]
                self._rr += 1
            self._deliver(self._queue.pop(0), sock, now)
            changed = True
        if changed:
            self._cond.notify_all()
        wakes = [e.deadline for e in self._events.values() if e.state == "in_flight"]
        wakes += [
            s.close_at for s in self._sockets
            if s.closed_at is None and s.close_at is not None and not s.close_now
        ]  # fmt: skip
        return min(wakes) if wakes else None

    def _deliver(self, event: _Event, sock: _Socket, now: float) -> None:
        envelope_id = str(uuid.uuid4())
        frame: dict[str, Any] = {"envelope_id": envelope_id, "payload": event.payload}
        frame["type"] = event.kind
        frame["accepts_response_payload"] = event.accepts_response_payload
        if event.kind == "events_api":
            frame["retry_attempt"] = event.delivered
            frame["retry_reason"] = event.retry_reason
        record = {
            "envelope_id": envelope_id, "event_id": event.key, "type": event.kind,
            "retry_attempt": event.delivered, "retry_reason": event.retry_reason,
            "socket": sock.id, "at": now, "written": False,
        }  # fmt: skip
        self._deliveries.append(record)
        self._by_envelope[envelope_id] = event
        event.delivered += 1
        event.state = "in_flight"
        event.deadline = now + self.ack_timeout
        sock.outbox.append((json.dumps(frame, ensure_ascii=False), record))

    # -- Socket Mode: the WebSocket kit's loop, with Slack's hello and acks ----------------

    def _ws_refusal(self, status: int, why: str) -> Reply:
        return _error(_WS_REFUSALS[why], status)

    def _ws_admit(self, request: TrackedHandler) -> Reply | None:
        ticket = query(request.path).get("ticket", "")
        if ticket not in self._tickets:
            self._rejected.append({"ticket": ticket, "at": time.monotonic()})
            self._cond.notify_all()
            return _error("invalid_ticket", 401)
        self._tickets.discard(ticket)
        return None

    def _ws_opened(self, sock: _Socket) -> None:
        open_now = sum(1 for s in self._sockets if s.closed_at is None)
        self._max_open = max(self._max_open, open_now)
        if self._link_disabled or open_now > self.max_connections:
            reason = "link_disabled" if self._link_disabled else "too_many_websockets"
            sock.accepting = False
            sock.disconnects.append(reason)
            sock.outbox.append((json.dumps(self._disconnect_frame(reason)), None))
            sock.close_now = True
        else:
            hello = {
                "type": "hello", "num_connections": open_now,
                "connection_info": {"app_id": APP_ID},
                "debug_info": {
                    "host": "applink-fake-1", "build_number": 1,
                    "approximate_connection_time": 18060,
                },
            }  # fmt: skip
            sock.outbox.append((json.dumps(hello), None))

    def _on_binary(self, sock: _Socket) -> None:
        with self._cond:
            sock.frames_in += 1
            self._cond.notify_all()

    def _on_client_close(self, sock: _Socket, code: int | None, first: bool) -> None:
        if first:
            sock.client_close_code = code

    def _on_frame(self, sock: _Socket, frame: Any, now: float) -> None:
        if not isinstance(frame, dict) or "envelope_id" not in frame:
            return
        envelope_id = str(frame["envelope_id"])
        event = self._by_envelope.get(envelope_id)
        self._acks.append({
            "envelope_id": envelope_id, "event_id": event.key if event else None,
            "socket": sock.id, "payload": frame.get("payload"), "at": now,
        })  # fmt: skip
        if event is not None and event.state in ("in_flight", "queued"):
            if event.state == "queued":  # a late ack of an earlier envelope
                self._queue.remove(event)
            event.state = "acked"
            if event.key not in self._acked:  # a redelivered one: named once
                self._acked.append(event.key)

    # -- the Web API ---------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return _error("fake_internal_error", 500)

    def _no_route(self, request: TrackedHandler, status: int) -> Reply:
        return _error("unknown_method", 404)

    def _signin(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, _SIGNIN_PAGE, content_type="text/html; charset=utf-8")

    def _web_api(self, request: TrackedHandler, raw: bytes, method: str) -> Reply:
        content_type = str(request.headers.get("content-type", ""))
        params: dict[str, Any] = query(request.path)
        try:
            body = decode_object(content_type, raw, "application/x-www-form-urlencoded")
        except BodyError as exc:
            error = "invalid_json" if exc.kind == "not_json" else "json_not_object"
            return self._finish(method, {}, None, _error(error))
        if media_type(content_type) == "application/json":
            body.pop("token", None)  # Slack takes no token in a JSON body
        params.update(body)
        form_token = params.pop("token", None)
        token = bearer(request.headers)
        if token is None and method != "apps.connections.open":
            token = form_token
        kind = {self.bot_token: "bot", self.app_token: "app"}.get(token or "")
        kind = kind or ("wrong" if token else None)
        return self._finish(method, params, kind, self._dispatch(method, params, kind))

    def _finish(self, method: str, params: dict[str, Any], kind: str | None, reply: Reply) -> Reply:
        now = time.monotonic()
        with self._cond:
            error = reply.body.get("error")
            self._calls.append({
                "method": method, "params": copy_json(params), "token": kind,
                "status": reply.status, "ok": bool(reply.body.get("ok")), "error": error,
                "at": now,
            })  # fmt: skip
            if not reply.body.get("ok"):
                retry_after = None
                channel = params.get("channel", params.get("channel_id"))
                for name, value in reply.headers:
                    if name.lower() == "retry-after":
                        retry_after = float(value)
                self._refused.append({
                    "method": method, "params": copy_json(params), "channel": channel,
                    "error": error, "status": reply.status, "retry_after": retry_after,
                    "at": now,
                })  # fmt: skip
            self._cond.notify_all()
        return reply

    def _dispatch(self, method: str, params: dict[str, Any], kind: str | None) -> Reply:
        if method != "apps.connections.open" and method not in _BOT_METHODS:
            return _error("unknown_method")
        wanted = "app" if method == "apps.connections.open" else "bot"
        if kind is None:
            return _error("not_authed")
        if kind == "wrong":
            return _error("invalid_auth")
        if kind != wanted:
            return _error("not_allowed_token_type")
        with self._cond:
            fault = self._faults.take(method, params.get("channel", params.get("channel_id")))
            if fault is not None:
                return fault
            if method == "auth.test":
                return _ok(
                    url=f"https://{TEAM_DOMAIN}.slack.com/", team=TEAM_NAME, user=BOT_NAME,
                    team_id=TEAM_ID, user_id=BOT_USER_ID, bot_id=BOT_ID,
                    is_enterprise_install=False,
                )  # fmt: skip
            if method == "apps.connections.open":
                if self._closing:
                    return _error("service_unavailable", 503)
                ticket = uuid.uuid4().hex
                self._tickets.add(ticket)
                self._urls_issued += 1
                self._cond.notify_all()
                host, port = self.server.server_address[:2]
                return _ok(url=f"ws://{host}:{port}/link/?ticket={ticket}&app_id={APP_ID}")
            try:
                if method == "chat.update":
                    return self._update_message(params)
                if method == "files.getUploadURLExternal":
                    return self._upload_url(params)
                if method == "files.completeUploadExternal":
                    return self._complete_upload(params)
                return self._post_message(params)
            except _Refusal as refusal:
                return refusal.reply

    def _post_message(self, params: dict[str, Any]) -> Reply:
        """chat.postMessage past auth and faults (holding the lock)."""
        channel = str(params.get("channel") or "")
        if not channel:
            return _error("channel_not_found")
        given, blocks = _content(params)
        text = given or ""
        if not text and not blocks and not params.get("attachments"):
            return _error("no_text")
        ts = self._next_ts()
        message: dict[str, Any] = {
            "type": "message", "text": text, "user": BOT_USER_ID, "bot_id": BOT_ID,
            "app_id": APP_ID, "team": TEAM_ID, "ts": ts,
        }  # fmt: skip
        if blocks:
            message["blocks"] = self._kept(blocks)
        thread_ts = params.get("thread_ts")
        if thread_ts:
            message["thread_ts"] = str(thread_ts)
        self._messages[ts] = {**message, "channel": channel}
        sent = {**copy_json(params), "channel": channel, "ts": ts, "at": time.monotonic()}
        if blocks is not None:
            sent["blocks"] = copy_json(blocks)
        self._sent.append(sent)
        if self.echo_bot_messages:
            event = {
                **message, "channel": channel, "event_ts": ts,
                "channel_type": _CHANNEL_TYPES.get(channel[:1], "channel"),
            }  # fmt: skip
            self._add_event(event, TEAM_ID)
        self._cond.notify_all()
        return _ok(channel=channel, ts=ts, message=message)

    def _update_message(self, params: dict[str, Any]) -> Reply:
        """chat.update past auth and faults (holding the lock): the stored message takes
        the new text and blocks (see the module's docstring)."""
        channel = str(params.get("channel") or "")
        if not channel:
            return _error("channel_not_found")
        text, blocks = _content(params)
        ts = str(params.get("ts") or "")
        message = self._messages.get(ts)
        if message is None or message["channel"] != channel:
            return _error("cant_update_message" if self._others.get(ts) == channel
                          else "message_not_found")  # fmt: skip
        now_text = message["text"] if text is None else text
        now_blocks = message.get("blocks") if blocks is None else blocks
        if not now_text and not now_blocks:
            return _error("no_text")
        previous = copy_json({k: v for k, v in message.items() if k != "channel"})
        message["text"] = now_text
        if blocks:
            message["blocks"] = self._kept(blocks)
        elif blocks is not None:  # [] removes them
            message.pop("blocks", None)
        edited_ts = self._next_ts()
        message["edited"] = {"user": BOT_USER_ID, "ts": edited_ts}
        self._edits.append({
            "channel": channel, "ts": ts, "text": text,
            "blocks": None if blocks is None else copy_json(blocks), "at": time.monotonic(),
        })  # fmt: skip
        shown = {k: v for k, v in message.items() if k != "channel"}
        if self.echo_bot_messages:
            event = {
                "type": "message", "subtype": "message_changed", "hidden": True,
                "channel": channel, "ts": edited_ts, "event_ts": edited_ts,
                "channel_type": _CHANNEL_TYPES.get(channel[:1], "channel"),
                "message": copy_json(shown), "previous_message": previous,
            }  # fmt: skip
            self._add_event(event, TEAM_ID)
        self._cond.notify_all()
        return _ok(channel=channel, ts=ts, text=now_text, message=copy_json(shown))

    def _kept(self, blocks: list[Any]) -> list[dict[str, Any]]:
        """`blocks` as Slack keeps them: a block_id on each (`fk<n>` when none came)."""
        return [
            {**copy_json(b), "block_id": b.get("block_id") or f"fk{next(self._block_ids)}"}
            for b in blocks
        ]  # fmt: skip

    def _response_url(self, request: TrackedHandler, raw: bytes, trigger_id: str) -> Reply:
        body: Any
        try:
            body = decode_body(request.headers.get("content-type", ""), raw, "text/plain")
        except BodyError:
            body = raw.decode("utf-8", "replace")
        with self._cond:
            self._responses.append({"trigger_id": trigger_id, "body": body, "at": time.monotonic()})
            self._cond.notify_all()
        return _ok()

    # -- files: the Web API's upload methods, the upload and download URLs ----------------

    def _upload_url(self, params: dict[str, Any]) -> Reply:
        """files.getUploadURLExternal past auth and faults (holding the lock)."""
        filename = params.get("filename")
        if not isinstance(filename, str) or not filename:
            raise _invalid("missing required field: filename")
        length = _whole_number(params.get("length"), "length")
        if length == 0:  # as Slack's reference says of missing_argument
            return _error("missing_argument")
        if length > self.max_upload:
            return _error("file_too_large")
        alt_txt, snippet_type = params.get("alt_txt"), params.get("snippet_type")
        if alt_txt is not None and not isinstance(alt_txt, str):
            raise _invalid("invalid type for field: alt_txt")
        if snippet_type is not None and not isinstance(snippet_type, str):
            raise _invalid("invalid type for field: snippet_type")
        if alt_txt is not None and len(alt_txt) > MAX_ALT_TXT:
            return _error("alt_txt_too_large")
        upload = _Upload(
            file_id=self._next_file_id(), key=secrets.token_urlsafe(24), filename=filename,
            length=length, alt_txt=alt_txt, snippet_type=snippet_type or None,
        )  # fmt: skip
        self._pending_uploads[upload.file_id] = upload
        self._upload_urls[upload.key] = upload
        self._cond.notify_all()
        return _ok(upload_url=f"{self.url}/upload/v1/{upload.key}", file_id=upload.file_id)

    def _take_upload(self, request: TrackedHandler, raw: bytes, key: str) -> Reply:
        """A POST to an upload URL: the bytes, raw or in a multipart/form-data body (the
        part named `file`, else `filename` (Slack's reference's curl example), else the
        first with a filename)."""
        with self._cond:
            upload = self._upload_urls.get(key)
        if upload is None:
            return _text(404, "not found")
        content_type = str(request.headers.get("content-type", ""))
        data = raw
        if media_type(content_type) == "multipart/form-data":
            try:
                parts = form_parts(content_type, raw)
            except BodyError:
                parts = []
            found = [p for p in parts if p.name == "file"] + [
                p for p in parts if p.name == "filename"
            ]
            found += [p for p in parts if p.filename is not None]
            if not found:
                return _text(400, "no file in the form")
            data = found[0].data
        if len(data) != upload.length:
            return _text(400, "length mismatch")
        digest = hashlib.sha256(data).hexdigest()
        with self._cond:
            if self._upload_urls.pop(key, None) is None:  # another POST took it meanwhile
                return _text(404, "not found")
            upload.state, upload.content, upload.sha256 = "uploaded", data, digest
            self._cond.notify_all()
        return _text(200, f"OK - {len(data)}")

    def _complete_upload(self, params: dict[str, Any]) -> Reply:
        """files.completeUploadExternal past auth and faults (holding the lock): every
        file or none (see the module's docstring)."""
        files = params.get("files")
        if files is None:
            raise _invalid("missing required field: files")
        if isinstance(files, str):  # a form's field
            try:
                files = json.loads(files)
            except ValueError:
                raise _invalid("invalid JSON in field: files") from None
        if (
            not isinstance(files, list) or not files
            or not all(isinstance(f, dict) and isinstance(f.get("id"), str) for f in files)
        ):  # fmt: skip
            raise _invalid("files must be a non-empty array of {id, title}")
        ids = [f["id"] for f in files]
        if len(set(ids)) != len(ids):
            raise _invalid("a file id is repeated in files")
        if "channels" in params:
            raise _invalid("the fake takes channel_id, not channels")
        channel = str(params.get("channel_id") or "")
        thread_ts = str(params.get("thread_ts") or "") or None
        if thread_ts and not channel:
            raise _invalid("thread_ts needs channel_id")
        comment = params.get("initial_comment")
        comment = None if comment is None else str(comment)
        if comment is not None and len(comment) > MAX_TEXT:
            return _error("msg_too_long")
        uploads = [self._pending_uploads.get(i) for i in ids]
        if any(u is None or u.state != "uploaded" for u in uploads):
            return _error("file_not_found")
        now, created = time.monotonic(), int(time.time())
        records: list[dict[str, Any]] = []
        infos: list[dict[str, Any]] = []
        for entry, upload in zip(files, uploads, strict=True):
            assert upload is not None and upload.content is not None
            title = str(entry.get("title") or upload.filename)
            mimetype = _guess_mimetype(upload.filename)
            kept = upload.content if len(upload.content) <= MAX_KEPT else None
            file = _File(
                id=upload.file_id, name=upload.filename, title=title, mimetype=mimetype,
                filetype=upload.snippet_type or _filetype(upload.filename, mimetype),
                size=upload.length, user=BOT_USER_ID, created=created, content=kept,
                alt_txt=upload.alt_txt,
            )  # fmt: skip
            self._files[file.id] = file
            upload.state, upload.content = "completed", None
            infos.append(file.info(self.url))
            records.append({
                "file_id": file.id, "filename": file.name, "title": title,
                "length": upload.length, "sha256": upload.sha256, "alt_txt": upload.alt_txt,
                "snippet_type": upload.snippet_type, "channel": channel or None,
                "thread_ts": thread_ts, "initial_comment": comment, "ts": None, "at": now,
                "content": kept,
            })  # fmt: skip
        if channel:
            ts = self._next_ts()
            message: dict[str, Any] = {
                "type": "message", "subtype": "file_share", "text": comment or "",
                "files": copy_json(infos), "upload": True, "display_as_bot": False,
                "user": BOT_USER_ID, "bot_id": BOT_ID, "app_id": APP_ID, "team": TEAM_ID,
                "ts": ts,
            }  # fmt: skip
            if thread_ts:
                message["thread_ts"] = thread_ts
            self._messages[ts] = {**message, "channel": channel}
            for record in records:
                record["ts"] = ts
            if self.echo_bot_messages:
                event = {
                    **copy_json(message), "channel": channel, "event_ts": ts,
                    "channel_type": _CHANNEL_TYPES.get(channel[:1], "channel"),
                }  # fmt: skip
                self._add_event(event, TEAM_ID)
        self._uploads.extend(records)
        self._cond.notify_all()
        return _ok(files=infos)

    def _serve_file(self, request: TrackedHandler, raw: bytes, file_path: str) -> Reply:
        """A GET of a file's url_private (`/files-pri/T0001-F.../<name>`) or
        url_private_download (`.../download/<name>`): the bytes to the bot token, a
        redirect to the sign-in page to anyone else."""
        path = urlsplit(request.path).path
        segments = path.split("/")
        if bearer(request.headers) != self.bot_token:
            where = f"{self.url}/signin?redir={quote(path, safe='')}"
            return Reply(302, b"", [("Location", where)], "text/html; charset=utf-8")
        rest = segments[3:]
        download = len(rest) == 2 and rest[0] == "download"
        prefix = f"{TEAM_ID}-"
        team_file = segments[2] if len(segments) > 2 else ""
        file_id = team_file[len(prefix) :] if team_file.startswith(prefix) else ""
        with self._cond:
            file = self._files.get(file_id)
            if (
                file is None or file.content is None or not (len(rest) == 1 or download)
                or unquote(rest[-1]) != file.name
            ):  # fmt: skip
                return _text(404, "file not found")
            self._downloads.append(file.id)
            self._cond.notify_all()
        extra = []
        if download:
            extra = [("Content-Disposition", f"attachment; filename*=UTF-8''{quote(file.name)}")]
        return Reply(200, Blob(file.content, file.size), extra, file.mimetype)


class _Refusal(Exception):
    """A call's parameters refused: `reply` is Slack's answer."""

    def __init__(self, error: str, **fields: Any) -> None:
        super().__init__(error)
        self.reply = _ERRORS.reply(200, error, **fields)


def _invalid(problem: str) -> _Refusal:
    """Slack's invalid_arguments, naming the problem as Slack does."""
    return _Refusal("invalid_arguments", response_metadata={"messages": [f"[ERROR] {problem}"]})


def _whole_number(value: Any, field: str) -> int:
    """A required integer argument (a form's is text); _Refusal when missing or not a
    whole number of 0 or more."""
    if value is None or value == "":
        raise _invalid(f"missing required field: {field}")
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _invalid(f"invalid type for field: {field}")


def _guess_mimetype(name: str) -> str:
    return mimetypes.guess_type(name, strict=False)[0] or "application/octet-stream"


def _filetype(name: str, mimetype: str) -> str:
    """Slack's short `filetype` of a file: its extension's (jpg, png, pdf, text, ...),
    else "text" or "binary"."""
    extension = name.rsplit(".", 1)[1].lower() if "." in name.strip(".") else ""
    if extension:
        return _FILETYPES.get(extension, extension)
    return "text" if mimetype.startswith("text/") else "binary"


def _content(params: dict[str, Any]) -> tuple[str | None, list[Any] | None]:
    """The `text` and `blocks` of a chat.postMessage or chat.update as given (None: left
    out; a form's blocks are a JSON string), checked: _Refusal for blocks that are not a
    list or break Block Kit's limits, or a text over MAX_TEXT."""
    text = params.get("text")
    text = None if text is None else str(text)
    blocks = params.get("blocks")
    if isinstance(blocks, str):  # a form's field
        try:
            blocks = json.loads(blocks)
        except ValueError:
            raise _Refusal("invalid_blocks_format") from None
    if blocks is not None and not isinstance(blocks, list):
        raise _Refusal("invalid_blocks_format")
    if text is not None and len(text) > MAX_TEXT:
        raise _Refusal("msg_too_long")
    if blocks:
        problem = _blocks_problem(blocks)
        if problem is not None:
            raise _Refusal("invalid_blocks", errors=[problem])
    return text, blocks


def _blocks_problem(blocks: list[Any]) -> str | None:
    """What chat.postMessage would find wrong with `blocks` (Block Kit's limits on the
    blocks hermes sends: sections, actions of buttons), or None."""
    if len(blocks) > MAX_BLOCKS:
        return f"more than {MAX_BLOCKS} blocks"
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"block {i}: not a block"
        block_id = block.get("block_id")
        if block_id is not None:
            if not block_id or len(str(block_id)) > MAX_ID or block_id in block_ids:
                return f"block {i}: block_id empty, too long or not unique"
            block_ids.add(block_id)
        if block["type"] == "section":
            text = block.get("text")
            if not isinstance(text, dict) or text.get("type") not in ("mrkdwn", "plain_text"):
                return f"block {i}: a section's text must be a text object"
            if not 1 <= len(str(text.get("text") or "")) <= MAX_SECTION_TEXT:
                return f"block {i}: a section's text must be 1 to {MAX_SECTION_TEXT} characters"
        elif block["type"] == "actions":
            problem = _actions_problem(block.get("elements"))
            if problem is not None:
                return f"block {i}: {problem}"
    return None


def _actions_problem(elements: Any) -> str | None:
    if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ELEMENTS:
        return f"an actions block holds 1 to {MAX_ELEMENTS} elements"
    action_ids: set[str] = set()
    for j, element in enumerate(elements):
        if not isinstance(element, dict) or element.get("type") != "button":
            continue  # other elements: not checked
        action_id = element.get("action_id")
        if action_id is not None:
            if not action_id or len(str(action_id)) > MAX_ID or action_id in action_ids:
                return f"element {j}: action_id empty, too long or not unique in its block"
            action_ids.add(action_id)
        label = element.get("text")
        if not isinstance(label, dict) or label.get("type") != "plain_text":
            return f"element {j}: a button's text must be plain_text"
        if not 1 <= len(str(label.get("text") or "")) <= MAX_BUTTON_LABEL:
            return f"element {j}: a button's text must be 1 to {MAX_BUTTON_LABEL} characters"
        if len(str(element.get("value") or "")) > MAX_BUTTON_VALUE:
            return f"element {j}: a button's value is over {MAX_BUTTON_VALUE} characters"
    return None


def _button(message: dict[str, Any], button: str) -> tuple[str, dict[str, Any]]:
    """The block_id and the element of the button of `message` whose value (else label)
    is `button`."""
    buttons = [
        (block["block_id"], element)
        for block in message.get("blocks") or [] if block.get("type") == "actions"
        for element in block.get("elements") or [] if element.get("type") == "button"
    ]  # fmt: skip
    for found in buttons:
        if found[1].get("value") == button:
            return found
    for found in buttons:
        if (found[1].get("text") or {}).get("text") == button:
            return found
    shown = [(e.get("text") or {}).get("text") for _, e in buttons]
    raise LookupError(f"message {message['ts']} has no button {button!r} (it has {shown})")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.slack",
        description="A fake Slack (Web API and Socket Mode): prints its base URL, "
        "serves until killed.",
    )
    parser.add_argument("--bot-token", default=BOT_TOKEN, help="the xoxb- token it accepts")
    parser.add_argument("--app-token", default=APP_TOKEN, help="the xapp- token it accepts")
    parser.add_argument("--ack-timeout", type=float, default=3.0, help="seconds before a retry")
    args = parser.parse_args()
    serve_until_killed(
        FakeSlack(bot_token=args.bot_token, app_token=args.app_token, ack_timeout=args.ack_timeout)
    )


if __name__ == "__main__":
    main()
