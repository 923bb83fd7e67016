"""A fake signal-cli daemon on 127.0.0.1: what `signal-cli daemon --http=HOST:PORT
--tcp=HOST:PORT --receive-mode=on-connection` serves in multi-account mode (one account,
ACCOUNT), for the tests of the Signal adapter, which must never start Java.

HTTP, on `url` (signal-cli-jsonrpc(5)):

    POST /api/v1/rpc     one JSON-RPC 2.0 request (Content-Type must start with
                         application/json, else 415 with no body); 200 with
                         {"jsonrpc":"2.0","result":...,"id":...} or
                         {"jsonrpc":"2.0","error":{"code","message","data"},"id":...}
                         ("data" is null when there is none, as signal-cli writes it);
                         a notification (no id, or a null one) is run and answered 201
                         with no body; a body that is not JSON: -32700; a request without
                         a method: -32600 "method field must be set" (id null)
    GET  /api/v1/events  a Server-Sent Events stream (below); `?account=` another account
                         than ACCOUNT: 400 with no body (its "+" must be sent as %2B: a
                         bare "+" is a space in a query); none: every account (the one)
    GET  /api/v1/check   200 with no body
    another verb on those paths: 405, another path: 404 (no body)

The stream is `HTTP/1.1 200`, `Content-Type: text/event-stream`, `Transfer-Encoding:
chunked`, and each chunk one of the exact frames signal-cli's ServerSentEventSender
writes (field, colon, value: no space after the colon):

    id:<run>-<seq>\\nevent:receive\\ndata:<json>\\n\\n   an incoming message
    :\\n                                             a keep-alive, every `keepalive` s

where <json> is compact `{"envelope":{...},"account":"+1555..."}` on one line. Event ids
are signal-cli's SseEventBuffer's: `<run>` is the daemon's start time in ms (a new one at
every `restart()`), `<seq>` counts from 1 in that run; a client must keep them as opaque
strings. The daemon keeps the last 1000 events it received (`buffered`); a client that
connects with a `Last-Event-ID` header first gets the kept events after that id, in order;
an id of another run (or not of the form) gets every kept event; no header, none.

TCP, on `tcp_address` when made with `tcp=True`: newline-delimited JSON-RPC, each line a
request, each answer one compact line `{"jsonrpc":"2.0","result":...,"id":...}\\n` (no line
for a notification); every incoming message is pushed to every TCP connection as the line
`{"jsonrpc":"2.0","method":"receive","params":{"envelope":{...},"account":"..."}}\\n` (no
id, no replay). Empty lines are skipped.

Receive mode on-connection: the daemon receives from Signal's servers only while at least
one client (an open event stream or TCP connection) is connected. A message the test
injects while none is waits in `pending` ("on Signal's servers") and is received, in
order, when the next client connects, never lost. A message received takes the next event
id, joins the 1000-event buffer and is queued to every open stream and TCP connection (a
message received while only TCP clients are connected is buffered too, as signal-cli's
recorder keeps whatever the account receives). `delivered` records each event as it is
written to a client (just before its bytes go), replays included. `restart()` is
signal-cli restarting: every stream and TCP connection is cut, the buffer is emptied and
a new run starts; what was written (or queued) but not yet taken by the client is gone
with it (the documented window); `pending` stays. `drop_streams()` cuts every stream and
TCP connection now (the buffer stays: a client that reconnects with its Last-Event-ID
gets what it missed). `deafen()` is a dead path back to the clients: open streams and TCP
connections stay open but nothing more is written to them (no events, no keep-alives, no
TCP answers; new ones are accepted and count as clients, but get not even their response
headers), what the daemon sends them waits, and `undeafen()` lets it through as a healed
path would. HTTP RPC calls still answer while deaf (use `fail()` for them).

Methods (params in signal-cli's camelCase; a list parameter takes one value or a list,
and its plural name too: `recipient`/`recipients`, `attachment`/`attachments`):

    version                          -> {"version": VERSION}                   (no account)
    listAccounts                     -> [{"number": ACCOUNT}]                  (no account)
    send {recipient | groupId, message, textStyle, mention, quoteTimestamp,
          quoteAuthor, quoteMessage, editTimestamp, attachment, noteToSelf}
                                     -> {"timestamp": ms, "results": [{"recipientAddress":
                                        {"uuid","number","username"}, "type": "SUCCESS"}]}
                                        one result per recipient; for a group one per
                                        member but the account, each with "groupId"
    sendTyping {recipient | groupId, stop}           -> {}
    getAttachment {id, recipient | groupId}          -> {"data": base64}
    listGroups                       -> [{"id","name","description","isMember","isBlocked",
                                        "messageExpirationTime","members":[{"number",
                                        "uuid"}],"pendingMembers","requestingMembers",
                                        "admins","banned","groupInviteLink"}]
    trust {recipient, trustAllKnownKeys: true | verifiedSafetyNumber} -> {}

A send's `attachment`s are data URIs (RFC 2397, as signal-cli's DataURI parses them:
`data:<mime>;filename=<%-escaped name>;base64,<data>`, the type `text/plain` when none,
the name URL-decoded; its pattern reads `data:<mime>;base64,<data>`, with no parameter,
as text, not base64, and so does the fake) or paths of files on the fake's machine (the
name their base name, the type guessed from it). Each is checked before anything goes,
as signal-cli uploads them before the message: one that does not parse, or a path that
cannot be read, is -32603 "Failed to send message: <it, cut>: <why>
(AttachmentInvalidException)"; one over `max_upload` bytes (default MAX_UPLOAD, Signal's
100 MiB) is refused as signal-cli reports the 413 of Signal's CDN (it has no limit of its
own), -32603 "Failed to send message: [413] Response: Response{protocol=h2, code=413,
message=, url=https://cdn3.signal.org/upload/attachments/<id>}
(NonSuccessfulResponseCodeException)" (recorded in `refused`, kind "too_large"). A send
that went records each of its attachments in `uploads`.

Every other method: -32601 "Method not implemented" (the real daemon has many more). A
per-account method needs `params.account`: missing, -32602 "Method requires valid account
parameter"; another number, -32602 "Specified account does not exist". Errors are
signal-cli's (SignalJsonRpcCommandHandler): -1 a user error, -3 IO, -4 an untrusted
identity, -5 a rate limit (newer versions; older ones answer -32603 with the same data),
-32602 params of the wrong type, -32603 internal. With the user-error messages
signal-cli's commands use: no recipient, "No recipients given"; an unknown group, "Group
not found: <id>"; nothing to send, "Sending empty message is not allowed, either a
message, attachment or sticker must be given."; a bad textStyle (start:length:STYLE,
STYLE one of STYLES, start and length in UTF-16 code units) "Invalid textStyle syntax
(<it>) expected 'start:length:STYLE'" or "Invalid style: <it>"; a bad mention likewise;
an unknown attachment "Could not find attachment with ID: <id>". A send to a number
`untrust()` named gets an IDENTITY_FAILURE result until `trust` is called for it; when no
recipient succeeded, the send is error -4 "Failed to send message due to untrusted
identities" with `data: {"response": {"timestamp", "results"}}` (with another recipient
that succeeded it is a success with mixed results, as signal-cli answers).

The test drives the fake from its own thread (every method is thread-safe): people
(`person`, `uuid_of`), groups (`group`), attachments (`attachment`), incoming envelopes
(`message`, `reaction`, `receipt`, `typing`, `edit`, `sync_sent`, `envelope`), faults
(`untrust`, `fail`, `rate_limit`, `clear_faults`) and the connection (`deafen`,
`undeafen`, `drop_streams`, `restart`). It reads what the client did in `calls`, `sent`,
`typing_sent`, `uploads`, `attachment_reads`, `trusted`, `refused`, `delivered`,
`streams`, `last_event_ids`, `pending`, `buffered` and waits with `wait_sent`,
`wait_uploads`, `wait_calls`, `wait_delivered`, `wait_connections`, `wait_open_streams`
and the kit's `wait_until`, which block on the fake's condition (no sleeping) and raise
TimeoutError naming what they waited for. Another process drives it over `POST
/_fake/<control>` (`_CONTROLS`) and reads `GET /_fake/state` (`_STATE`; an upload's
bytes as base64 text, `content_base64`); `python -m tests.fakes.signal [--tcp]` prints its
URL and serves until killed.

Where the fake knowingly differs from signal-cli: one account, no linking or
registration, no real Signal behind it (every recipient exists, anyone can be sent to;
an attachment is decoded and measured but goes nowhere, and its size is checked by the
fake, not by a CDN; an error names a data URI cut to its first 64 characters, where
signal-cli names all of it); no cap on the length of a JSON string (signal-cli's Jackson
refuses one over 20,000,000 characters: a data URI of about 14.3 MiB); the fake notices
at once that a client closed its stream (signal-cli only at its next write, so a message
received meanwhile is lost for that client but kept in the buffer); `restart()` is
instant (the real one refuses connections for a while); requests run one at a time per
TCP connection (signal-cli runs them in parallel); a fault is used up by the next call
of its method whatever its params; JSON-RPC batches are refused with -32600 (signal-cli's
HTTP endpoint cannot answer more than one request); `version` answers VERSION, though the
event ids and Last-Event-ID replay are those of signal-cli's SseEventBuffer (newer than
0.13: 0.13's events carry no id and it ignores Last-Event-ID); sendTyping answers {}
(some versions answer send results); a received envelope's `serverDeliveredTimestamp` is
when it was injected.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import email.utils
import hashlib
import itertools
import json
import mimetypes
import re
import secrets
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlsplit

import attrs

from tests.fakes.kit import Fake, infos, observed, serve_until_killed
from tests.fakes.local_http import Reply, TrackedHandler, copy_json, routes, shut

ACCOUNT = "+15550000001"  # hermes's number: the daemon's one account
ALICE = "+15550000002"
BOB = "+15550000003"
CAROL = "+15550000004"
NAMES = {ACCOUNT: "Hermes", ALICE: "Alice", BOB: "Bob", CAROL: "Carol"}
VERSION = "0.13.12"
_OTHER_ACCOUNT = "__account"  # an injected envelope's other account, until it is received
KEEPALIVE = 15.0  # seconds between keep-alives, as signal-cli
BUFFER_SIZE = 1000  # events kept for Last-Event-ID, as signal-cli's SseEventBuffer
STYLES = ("NONE", "BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE")
PLACEHOLDER = "\ufffc"  # where a mention sits in a message's text
EVENTS_PATH = "/api/v1/events"
MAX_UPLOAD = 100 * 1024 * 1024  # bytes of one attachment Signal takes (its documented limit)
KEPT_CONTENT = 1024 * 1024  # an upload's bytes are in its record up to this size

USER_ERROR = -1
IO_ERROR = -3
UNTRUSTED_KEY_ERROR = -4
RATE_LIMIT_ERROR = -5
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
_MESSAGES = {USER_ERROR: "User error", IO_ERROR: "IO error", UNTRUSTED_KEY_ERROR:
             "Failed to send message due to untrusted identities", RATE_LIMIT_ERROR:
             "Failed to send message due to rate limiting", INTERNAL_ERROR:
             "An internal server error has occurred."}  # fmt: skip
_GLOBAL_METHODS = frozenset({"version", "listAccounts"})
_ACCOUNT_METHODS = frozenset({"send", "sendTyping", "getAttachment", "listGroups", "trust"})
_HTTP_ONLY = frozenset({"events", "check"})  # fail() pseudo-methods: the other endpoints
_HTTP_STATUS = "http-status"  # the target of a fault answering an HTTP status
_SPEC = re.compile(r"(\d+):(\d+):(.+)", re.DOTALL)  # textStyle and mention
_RECEIPTS = ("DELIVERY", "READ", "VIEWED")
_UNPARSED = "Failed to parse JSON-RPC request"
_EMPTY = ("Sending empty message is not allowed, either a message, attachment or sticker must "
          "be given.")  # fmt: skip
_EXTENSIONS = re.compile(r"\.[A-Za-z0-9]{1,8}$")
# signal-cli's DataURI.DATA_URI_PATTERN up to the comma, matched on what comes before
# the first one (its lazy groups read `data:image/png;base64,...` as a parameter
# ";base64" and no base64: text, as signal-cli does; a filename parameter avoids it)
_DATA_URI = re.compile(r"data:(?P<type>.+?/.+?)?(?P<parameters>;.+?)?(?P<base64>;base64)?,",
                       re.IGNORECASE)  # fmt: skip
_PARAMETER = re.compile(r";(?P<key>.+)=(?P<value>.+)")  # as its \G;(.+)=(.+): one, greedy
_CDN = "https://cdn3.signal.org/upload/attachments/"


def compact(value: Any) -> str:
    """JSON as signal-cli's Jackson writes it: no spaces, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_slice(text: str, start: int, length: int) -> str | None:
    """The text `length` UTF-16 code units from `start`; None when that runs past the end
    or splits a surrogate pair."""
    units = text.encode("utf-16-le")
    if start < 0 or length < 0 or 2 * (start + length) > len(units):
        return None
    try:
        return units[2 * start : 2 * (start + length)].decode("utf-16-le")
    except UnicodeDecodeError:
        return None


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": data},
            "id": rid}  # fmt: skip


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@attrs.define
class _Fault:
    kind: str  # "error" | "http" | "rate_limit"
    code: int | None = None
    message: str | None = None
    data: Any = None
    http_status: int | None = None
    retry_after: int | None = None


@attrs.define
class _Answer:
    response: dict[str, Any] | None  # None: a notification's, nothing to answer
    http_status: int | None = None  # an HTTP fault: this status, no body


@attrs.define(eq=False)
class _Event:
    seq: int
    id: str
    envelope: dict[str, Any]
    data: str  # the compact {"envelope", "account"}


@attrs.define(eq=False)
class _Frame:
    data: bytes  # as written on the wire
    kind: str  # "headers" | "event" | "notification" | "answer" | "keepalive"
    event: _Event | None = None
    replay: bool = False


@attrs.define(eq=False)
class _Conn:
    """An event stream ("sse") or a TCP connection ("tcp"): a client of the daemon."""

    id: int
    transport: str
    sock: socket.socket
    opened_at: float
    last_event_id: str | None = None
    outbox: list[_Frame] = attrs.Factory(list)
    close_now: bool = False
    graceful: bool = False  # an SSE stream's last chunk is written before it closes
    closed_at: float | None = None
    closed_by: str | None = None  # "client" | "drop" | "restart" | "stop" | "write"
    events: int = 0  # events (or notifications) written
    keepalives: int = 0

    @property
    def open(self) -> bool:
        return self.closed_at is None and not self.close_now

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id, "transport": self.transport, "opened_at": self.opened_at,
            "closed_at": self.closed_at, "open": self.open, "closed_by": self.closed_by,
            "last_event_id": self.last_event_id, "events": self.events,
            "keepalives": self.keepalives, "queued": len(self.outbox),
        }  # fmt: skip


@attrs.define(eq=False)
class _Group:
    id: str
    name: str
    members: list[str]  # numbers, the account first

    def info(self, fake: FakeSignal) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "description": "", "isMember": True,
            "isBlocked": False, "messageExpirationTime": 0,
            "members": [{"number": m, "uuid": fake._uuid(m)} for m in self.members],
            "pendingMembers": [], "requestingMembers": [],
            "admins": [{"number": ACCOUNT, "uuid": fake._uuid(ACCOUNT)}], "banned": [],
            "groupInviteLink": None,
        }  # fmt: skip


def _open_count(conns: list[_Conn]) -> int:
    return sum(1 for c in conns if c.open)


class FakeSignal(Fake):
    """signal-cli's daemon: JSON-RPC over HTTP and TCP, events over SSE, as the module's
    docstring tells."""

    name = "signal-cli"
    _socket_paths = frozenset({EVENTS_PATH})
    _ROUTES = routes(
        ("POST", "/api/v1/rpc", "_http_rpc"),
        ("GET", "/api/v1/check", "_check"),
        ("GET", EVENTS_PATH, "_serve_socket"),  # a GET is a stream (the kit's): others 405
    )
    # For another process: `python -m tests.fakes.signal`.
    _CONTROLS = frozenset({
        "person", "group", "message", "reaction", "receipt", "typing", "edit", "sync_sent",
        "envelope", "untrust", "fail", "rate_limit", "clear_faults", "deafen", "undeafen",
        "drop_streams", "restart",
    })  # fmt: skip
    _STATE = ("sent", "delivered", "typing_sent", "refused", "internal_errors", "pending",
              "connections", "open_streams", "last_event_ids", "trusted", "calls",
              "attachment_reads", "tcp_address", "uploads")  # fmt: skip

    def __init__(
        self,
        *,
        account: str = ACCOUNT,
        keepalive: float = KEEPALIVE,
        tcp: bool = False,
        port: int = 0,
        tcp_port: int = 0,
    ) -> None:
        """A daemon with one account (`account`), keep-alives every `keepalive` seconds
        on its event streams, and a JSON-RPC TCP socket too when `tcp`."""
        super().__init__(port)
        self.account = account
        self.keepalive = float(keepalive)
        self.max_upload = MAX_UPLOAD  # bytes of one attachment taken; a test may lower it
        self._conn_ids = itertools.count(1)
        self._conns: list[_Conn] = []
        self._run = 0
        self._seq = 0
        self._new_run()
        self._buffer: deque[_Event] = deque(maxlen=BUFFER_SIZE)
        self._pending: list[dict[str, Any]] = []
        self._deaf = False
        self._writing = 0  # writers with frames taken and not yet written
        self._last_ts = 0
        self._people: dict[str, dict[str, Any]] = {}  # number -> {number, uuid, name}
        self._groups: dict[str, _Group] = {}
        self._attachments: dict[str, bytes] = {}
        self._untrusted: set[str] = set()
        # records
        self._calls: list[dict[str, Any]] = []
        self._typing_sent: list[dict[str, Any]] = []
        self._uploads: list[dict[str, Any]] = []
        self._attachment_reads: list[dict[str, Any]] = []
        self._trusted: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._delivered: list[dict[str, Any]] = []
        for number, name in NAMES.items():
            self.person(number, name)
        self.person(account, NAMES.get(account, "Hermes"))
        self._tcp: socket.socket | None = None
        if tcp:
            self._tcp = socket.create_server(("127.0.0.1", tcp_port))

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def tcp_address(self) -> tuple[str, int] | None:
        """(host, port) of the JSON-RPC TCP socket; None when made without `tcp`."""
        if self._tcp is None:
            return None
        host, port = self._tcp.getsockname()[:2]
        return (host, port)

    def __enter__(self) -> FakeSignal:
        super().__enter__()
        if self._tcp is not None:
            threading.Thread(target=self._accept_loop, args=(self._tcp,), daemon=True).start()
        return self

    def close(self) -> None:
        """Stop serving: every connection is cut at once."""
        self._stop()

    def _stop(self) -> None:
        with self._cond:
            conns = list(self._conns)
        super()._stop()
        if self._tcp is not None:
            shut(self._tcp)  # wakes accept()
            self._tcp.close()
        for conn in conns:
            shut(conn.sock)

    # -- people, groups, attachments -----------------------------------------------------

    def person(self, number: str, name: str | None = None) -> dict[str, Any]:
        """Someone on Signal: {number, uuid, name}; made (with a new uuid, stable for the
        fake's life) on first sight, `name` their profile name from now on if given."""
        with self._cond:
            found = self._people.get(number)
            if found is None:
                found = {"number": number, "uuid": str(uuid.uuid4()), "name": name or ""}
                self._people[number] = found
            elif name is not None:
                found["name"] = name
            return dict(found)

    def uuid_of(self, number: str) -> str:
        return self.person(number)["uuid"]

    def group(self, name: str, members: Iterable[str]) -> str:
        """A group the account is in with `members` (numbers); returns its id (base64 of
        32 random bytes), known to listGroups, send and sendTyping."""
        numbers = [str(m) for m in members]
        with self._cond:
            group_id = base64.b64encode(secrets.token_bytes(32)).decode()
            ordered = [self.account] + [m for m in dict.fromkeys(numbers) if m != self.account]
            for number in ordered:
                self.person(number)
            self._groups[group_id] = _Group(group_id, name, ordered)
            return group_id

    def attachment(
        self,
        data: bytes,
        content_type: str = "application/octet-stream",
        filename: str | None = None,
    ) -> dict[str, Any]:
        """An attachment (its bytes kept for getAttachment) to put in an incoming message:
        {contentType, filename, id, size, width, height, caption, uploadTimestamp}."""
        ext = _EXTENSIONS.search(filename or "")
        attachment_id = secrets.token_urlsafe(15) + (ext.group(0) if ext else "")
        with self._cond:
            self._attachments[attachment_id] = bytes(data)
            return {"contentType": content_type, "filename": filename, "id": attachment_id,
                    "size": len(data), "width": None, "height": None, "caption": None,
                    "uploadTimestamp": self._timestamp()}  # fmt: skip

    # -- incoming envelopes ---------------------------------------------------------------

    def message(
        self,
        source: str,
        text: str | None,
        *,
        group: str | None = None,
        mentions: Iterable[Any] = (),
        quote: Any = None,
        attachments: Iterable[Any] = (),
        timestamp: int | None = None,
        source_name: str | None = None,
        source_uuid: str | None = None,
    ) -> dict[str, Any]:
        """A data message from `source` (a number) to the account, or in `group`; returns
        the envelope. `mentions`: (number, start, length) over a U+FFFC placeholder of the
        text (UTF-16 code units, as Signal sends them), or a number alone for the next
        placeholder not taken; `quote`: an envelope or a `sent` record to quote, or
        (author, timestamp[, text]); `attachments`: made by `attachment()` (or their
        ids); `source_name`/`source_uuid` override the person's."""
        with self._cond:
            ts = self._timestamp() if timestamp is None else int(timestamp)
            data = self._data_message(ts, text, group, source)
            found = self._mentions(text or "", mentions)
            if found:
                data["mentions"] = found
            shown = [self._attachment_info(a) for a in attachments]
            if shown:
                data["attachments"] = shown
            if quote is not None:
                data["quote"] = self._quote(quote)
            envelope = self._envelope(source, ts, source_name=source_name,
                                      source_uuid=source_uuid, dataMessage=data)  # fmt: skip
            return self._inject(envelope)

    def reaction(
        self,
        source: str,
        emoji: str,
        target_author: str,
        target_timestamp: int,
        *,
        group: str | None = None,
        remove: bool = False,
    ) -> dict[str, Any]:
        """A reaction (dataMessage.reaction, no text) to the message of `target_author`
        sent at `target_timestamp`; returns the envelope."""
        with self._cond:
            ts = self._timestamp()
            data = self._data_message(ts, None, group, source)
            author = self.person(target_author)
            data["reaction"] = {
                "emoji": emoji, "targetAuthor": target_author,
                "targetAuthorNumber": target_author, "targetAuthorUuid": author["uuid"],
                "targetSentTimestamp": int(target_timestamp), "isRemove": bool(remove),
            }  # fmt: skip
            return self._inject(self._envelope(source, ts, dataMessage=data))

    def receipt(
        self, source: str, timestamps: Iterable[int], kind: str = "DELIVERY"
    ) -> dict[str, Any]:
        """A receipt (receiptMessage) for the account's messages sent at `timestamps`;
        `kind` DELIVERY, READ or VIEWED."""
        if kind not in _RECEIPTS:
            raise ValueError(f"kind must be one of {_RECEIPTS}")
        with self._cond:
            ts = self._timestamp()
            receipt = {"when": ts, "isDelivery": kind == "DELIVERY", "isRead": kind == "READ",
                       "isViewed": kind == "VIEWED",
                       "timestamps": [int(t) for t in timestamps]}  # fmt: skip
            return self._inject(self._envelope(source, ts, receiptMessage=receipt))

    def typing(
        self, source: str, action: str = "STARTED", *, group: str | None = None
    ) -> dict[str, Any]:
        """A typing indicator (typingMessage), STARTED or STOPPED."""
        if action not in ("STARTED", "STOPPED"):
            raise ValueError("action must be STARTED or STOPPED")
        with self._cond:
            ts = self._timestamp()
            typing: dict[str, Any] = {"action": action, "timestamp": ts}
            if group is not None:
                typing["groupId"] = self._group(group).id
            return self._inject(self._envelope(source, ts, typingMessage=typing))

    def edit(
        self, source: str, target_timestamp: int, text: str, *, group: str | None = None
    ) -> dict[str, Any]:
        """An edit (editMessage {targetSentTimestamp, dataMessage}) of the message
        `source` sent at `target_timestamp`."""
        with self._cond:
            ts = self._timestamp()
            edit = {"targetSentTimestamp": int(target_timestamp),
                    "dataMessage": self._data_message(ts, text, group, source)}  # fmt: skip
            return self._inject(self._envelope(source, ts, editMessage=edit))

    def sync_sent(
        self, destination: str | None, text: str, *, group: str | None = None
    ) -> dict[str, Any]:
        """What the account sent from another of its devices (syncMessage.sentMessage,
        source the account, device 2), to `destination` or in `group`."""
        with self._cond:
            ts = self._timestamp()
            sent: dict[str, Any] = {
                "destination": destination, "destinationNumber": destination,
                "destinationUuid": None if destination is None else self._uuid(destination),
            }  # fmt: skip
            sent.update(self._data_message(ts, text, group, self.account))
            envelope = self._envelope(self.account, ts, device=2,
                                      syncMessage={"sentMessage": sent})  # fmt: skip
            return self._inject(envelope)

    def envelope(self, raw: dict[str, Any], account: str | None = None) -> dict[str, Any]:
        """Any envelope, as given (a `timestamp` added if it has none); `account`: as
        received by another account of the daemon (a multi-account daemon's socket
        carries every account's)."""
        if not isinstance(raw, dict):
            raise ValueError("an envelope is a JSON object")
        with self._cond:
            envelope = copy_json(raw)
            envelope.setdefault("timestamp", self._timestamp())
            if account is not None:
                envelope[_OTHER_ACCOUNT] = account
            return self._inject(envelope)

    # -- faults and the connection ------------------------------------------------------

    def untrust(self, number: str) -> None:
        """Sends to `number` get an IDENTITY_FAILURE result (error -4 when nobody else
        got it) until a `trust` call for it."""
        with self._cond:
            self._untrusted.add(number)

    def fail(
        self,
        method: str,
        code: int | None = None,
        message: str | None = None,
        *,
        times: int | None = 1,
        data: Any = None,
        http_status: int | None = None,
        transport: str | None = None,
    ) -> None:
        """The next `times` calls (None: all) of `method` ("*": any) answer the JSON-RPC
        error `code` (`message` by default signal-cli's for it) with `data`, over
        `transport` ("http", "tcp"; None: both); or, with `http_status`, that HTTP status
        with no body (HTTP only). The pseudo-methods "events" and "check" (with
        `http_status`; "*" includes them) fail the next event-stream connections and
        checks."""
        if http_status is None and code is None:
            raise ValueError("fail() needs a JSON-RPC code or an http_status")
        if method in _HTTP_ONLY and http_status is None:
            raise ValueError(f"{method} fails only with an http_status")
        target = transport
        if http_status is not None:
            if transport not in (None, "http"):
                raise ValueError("an http_status fails HTTP calls only")
            fault = _Fault("http", http_status=int(http_status))
            target = _HTTP_STATUS
        else:
            assert code is not None
            text = message if message is not None else _MESSAGES.get(code, "Error")
            fault = _Fault("error", int(code), text, copy_json(data))
        if transport not in (None, "http", "tcp"):
            raise ValueError("transport is http, tcp or None")
        with self._cond:
            self._faults.add(fault, method, target, times)

    def rate_limit(
        self, retry_after_seconds: int, times: int | None = 1, code: int = RATE_LIMIT_ERROR
    ) -> None:
        """The next `times` sends answer error `code` (-5; signal-cli versions that map no
        code to a rate limit answer -32603) "Failed to send message due to rate limiting"
        with `data.response.results`: a RATE_LIMIT_FAILURE per recipient carrying
        `retryAfterSeconds`."""
        with self._cond:
            self._faults.add(_Fault("rate_limit", int(code), retry_after=int(retry_after_seconds)),
                             "send", None, times)  # fmt: skip

    def deafen(self, timeout: float = 10.0) -> None:
        """A dead path to the clients: from now on nothing is written to a stream or TCP
        connection (open or new), not even a keep-alive, until `undeafen()`. Returns once
        no write is under way, so nothing arrives after it returns."""
        with self._cond:
            self._deaf = True
            self._cond.notify_all()
        self._wait(lambda: self._writing == 0, timeout, "end of the writes under way")

    def undeafen(self) -> None:
        """The path heals: what waited is written, keep-alives resume."""
        self._change(_deaf=False)

    def drop_streams(self, graceful: bool = False) -> None:
        """Close every open stream and TCP connection now (the client must reconnect):
        cut, or with `graceful` an event stream's last chunk first. The buffer stays;
        what was queued for them and not written is lost to them."""
        with self._cond:
            for conn in self._conns:
                if conn.open:
                    conn.close_now, conn.graceful, conn.closed_by = True, graceful, "drop"
            self._cond.notify_all()

    def restart(self) -> None:
        """signal-cli restarts: every stream and TCP connection is cut, the buffer and
        its ids are gone (a new run: earlier ids are unknown), pending messages stay."""
        with self._cond:
            for conn in self._conns:
                if conn.open:
                    conn.close_now, conn.graceful, conn.closed_by = True, False, "restart"
            self._buffer.clear()
            self._new_run()
            self._cond.notify_all()

    # -- observing ----------------------------------------------------------------------

    calls = observed("_calls", """Every JSON-RPC request with a method, in order: `method`,
        `params` (as given), `id`, `transport` ("http" | "tcp"), `at`.""")  # fmt: skip
    sent = observed("_sent", """Every send that went out: `recipients` (as given; empty for a
        group), `group_id` (the first groupId, else None), `group_ids`, `note_to_self`,
        `message`, `text_styles` (as given), `styled` ([style, the text it covers, None when
        the range is past the end or splits a surrogate pair]), `mentions` (as given),
        `quote_timestamp`, `quote_author`, `quote_message`, `edit_timestamp`,
        `attachments` (as given), `timestamp`, `results`, `transport`, `at`.""")  # fmt: skip
    uploads = observed("_uploads", """Each attachment of a send that went, in order:
        `recipients` (as given; empty for a group), `group_id` (the first groupId, else
        None), `filename` (None when the data URI names none), `content_type`, `size`,
        `sha256` (hex), `message` (the send's text), `timestamp` (the send's), `source`
        ("data" | "path"), `transport`, `at`, `content` (the bytes when at most 1 MiB,
        else None).""")  # fmt: skip
    typing_sent = observed("_typing_sent", """sendTyping calls: `recipients`, `group_id`,
        `stop`, `transport`, `at`.""")  # fmt: skip
    attachment_reads = observed("_attachment_reads", """getAttachment calls answered: `id`,
        `recipient`, `group_id`, `size`, `at`.""")  # fmt: skip
    trusted = observed("_trusted", """trust calls: `recipient`, `all_keys` (trustAllKnownKeys),
        `safety_number`, `at`.""")  # fmt: skip
    refused = observed("_refused", """Calls answered with an error on demand (fail,
        rate_limit, untrust) or for an attachment over `max_upload`, in order: `method`,
        `kind` ("error" | "http" | "rate_limit" | "untrusted" | "too_large"), `code`,
        `message`, `http_status`, `transport`, `at`.""")  # fmt: skip
    delivered = observed("_delivered", """Every event written to a client, recorded as its
        bytes go: `id` (None for a TCP notification), `timestamp` (the envelope's), `stream`
        (the connection's id), `transport`, `replay` (sent for a Last-Event-ID), `failed`
        (the write failed: the client was gone), `at`.""")  # fmt: skip
    pending = observed("_pending", "Envelopes waiting for a client to connect, in order.")
    connections = observed("_conns", "Streams and TCP connections opened in the fake's life.",
                           len)  # fmt: skip
    open_streams = observed("_conns", "Streams and TCP connections open now.", _open_count)
    streams = observed("_conns", """Every stream and TCP connection, in order: `id`,
        `transport`, `opened_at`, `closed_at`, `open`, `closed_by`, `last_event_id`,
        `events`, `keepalives`, `queued`.""", infos)  # fmt: skip
    last_event_ids = observed("_conns", """The Last-Event-ID header of each event stream, in
        order of connection (None: none).""",
        lambda conns: [c.last_event_id for c in conns if c.transport == "sse"])  # fmt: skip
    buffered = observed("_buffer", "The events kept for replay: `id`, `timestamp`.",
                        lambda events: [{"id": e.id, "timestamp": e.envelope.get("timestamp")}
                                        for e in events])  # fmt: skip
    deaf = observed("_deaf", "Whether deafen() holds the writes now.")

    def sent_to(self, chat: str) -> list[dict[str, Any]]:
        """The sends to one recipient (as given) or group."""
        with self._cond:
            return copy_json([s for s in self._sent if self._sent_to(s, chat)])

    def wait_sent(
        self, count: int = 1, timeout: float = 10.0, *, to: str | None = None
    ) -> list[dict[str, Any]]:
        """The sends (to `to`, a recipient or group, if given), once at least `count`."""
        where = "" if to is None else f" to {to}"
        return self._wait_records("_sent", count, timeout, f"{count} send(s){where}",
                                  lambda s: to is None or self._sent_to(s, to))  # fmt: skip

    def wait_uploads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The attachments sent, once at least `count` were."""
        return self._wait_records("_uploads", count, timeout, f"{count} attachment(s) sent")

    def wait_calls(self, method: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """The calls of `method` ("*": any), once at least `count` came."""
        return self._wait_records("_calls", count, timeout, f"{count} {method} call(s)",
                                  lambda c: method in ("*", c["method"]))  # fmt: skip

    def wait_delivered(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The events written to clients, once at least `count` were."""
        return self._wait_records("_delivered", count, timeout, f"{count} event(s) delivered")

    def wait_connections(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` streams or TCP connections were opened in the fake's life."""
        self._wait(lambda: len(self._conns) >= count, timeout,
                   f"{count} connection(s) opened")  # fmt: skip

    def wait_open_streams(self, count: int, timeout: float = 10.0) -> None:
        """Until exactly `count` streams and TCP connections are open (0: all closed)."""
        self._wait(lambda: _open_count(self._conns) == count, timeout,
                   f"exactly {count} open stream(s)")  # fmt: skip

    def wait_refused(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_refused", count, timeout, f"{count} refused call(s)")

    # -- internals (called holding the lock) -------------------------------------------------

    def _new_run(self) -> None:
        self._run = max(int(time.time() * 1000), self._run + 1)
        self._seq = 0

    def _timestamp(self) -> int:
        self._last_ts = max(int(time.time() * 1000), self._last_ts + 1)
        return self._last_ts

    def _uuid(self, number: str) -> str:
        return self.person(number)["uuid"]

    def _group(self, group_id: str) -> _Group:
        found = self._groups.get(group_id)
        if found is None:
            raise LookupError(f"no group {group_id}: make it with group()")
        return found

    def _sent_to(self, record: dict[str, Any], chat: str) -> bool:
        return chat in record["recipients"] or chat in record["group_ids"]

    def _envelope(
        self,
        source: str,
        ts: int,
        *,
        device: int = 1,
        source_name: str | None = None,
        source_uuid: str | None = None,
        **content: Any,
    ) -> dict[str, Any]:
        who = self.person(source)
        envelope = {
            "source": source, "sourceNumber": source,
            "sourceUuid": source_uuid or who["uuid"],
            "sourceName": who["name"] if source_name is None else source_name,
            "sourceDevice": device, "timestamp": ts, "serverReceivedTimestamp": ts,
            "serverDeliveredTimestamp": ts,
        }  # fmt: skip
        envelope.update(content)
        return envelope

    def _data_message(
        self, ts: int, text: str | None, group: str | None, sender: str
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"timestamp": ts, "message": text, "expiresInSeconds": 0,
                                "isExpirationUpdate": False, "viewOnce": False}  # fmt: skip
        if group is not None:
            found = self._group(group)
            if sender not in found.members:
                raise ValueError(f"{sender} is not a member of the group {found.name}")
            data["groupInfo"] = {"groupId": found.id, "groupName": found.name, "revision": 1,
                                 "type": "DELIVER"}  # fmt: skip
        return data

    def _mentions(self, text: str, mentions: Iterable[Any]) -> list[dict[str, Any]]:
        placeholders: list[int] = []
        offset = 0
        for char in text:
            if char == PLACEHOLDER:
                placeholders.append(offset)
            offset += utf16_len(char)
        wanted = [m if isinstance(m, str) else tuple(m) for m in mentions]
        taken = {int(m[1]) for m in wanted if not isinstance(m, str)}
        free = (p for p in placeholders if p not in taken)
        found = []
        for mention in wanted:
            if isinstance(mention, str):
                start = next(free, None)
                if start is None:
                    raise ValueError(f"no U+FFFC placeholder left in the text for {mention}")
                number, length = mention, 1
            else:
                number, start, length = str(mention[0]), int(mention[1]), int(mention[2])
                if utf16_slice(text, start, length) != PLACEHOLDER:
                    raise ValueError(f"the mention of {number} at {start}:{length} does not "
                                     "cover a U+FFFC placeholder (UTF-16 code units)")  # fmt: skip
            found.append({"name": number, "number": number, "uuid": self._uuid(number),
                          "start": start, "length": length})  # fmt: skip
        return found

    def _attachment_info(self, attachment: Any) -> dict[str, Any]:
        if isinstance(attachment, str):
            if attachment not in self._attachments:
                raise LookupError(f"no attachment {attachment}: make it with attachment()")
            return {"contentType": "application/octet-stream", "filename": None,
                    "id": attachment, "size": len(self._attachments[attachment]),
                    "width": None, "height": None, "caption": None,
                    "uploadTimestamp": None}  # fmt: skip
        if not isinstance(attachment, dict) or attachment.get("id") not in self._attachments:
            raise LookupError("an attachment is one attachment() made (or its id)")
        return copy_json(attachment)

    def _quote(self, quote: Any) -> dict[str, Any]:
        if isinstance(quote, dict) and "dataMessage" in quote:  # an envelope
            author, ts = quote["sourceNumber"], quote["timestamp"]
            text = quote["dataMessage"].get("message")
        elif isinstance(quote, dict) and "results" in quote:  # a send of the account
            author, ts, text = self.account, quote["timestamp"], quote.get("message")
        elif isinstance(quote, dict):
            author, ts, text = quote["author"], quote["timestamp"], quote.get("text")
        else:
            parts = list(quote)
            author, ts = parts[0], parts[1]
            text = parts[2] if len(parts) > 2 else None
        return {"id": int(ts), "author": author, "authorNumber": author,
                "authorUuid": self._uuid(author), "text": text, "attachments": []}  # fmt: skip

    def _inject(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Receive the envelope now if a client is connected, else keep it pending."""
        if any(c.open for c in self._conns):
            self._receive(envelope)
        else:
            self._pending.append(envelope)
        self._cond.notify_all()
        return copy_json(envelope)

    def _receive(self, envelope: dict[str, Any]) -> None:
        """The daemon receives `envelope`: its event id, the buffer, every client."""
        self._seq += 1
        envelope = dict(envelope)
        account = envelope.pop(_OTHER_ACCOUNT, self.account)
        data = compact({"envelope": envelope, "account": account})
        event = _Event(self._seq, f"{self._run}-{self._seq}", copy_json(envelope), data)
        self._buffer.append(event)
        for conn in self._conns:
            if conn.open:
                conn.outbox.append(self._event_frame(conn, event))

    def _event_frame(self, conn: _Conn, event: _Event, replay: bool = False) -> _Frame:
        if conn.transport == "sse":
            text = f"id:{event.id}\nevent:receive\ndata:{event.data}\n\n"
            return _Frame(_chunk(text.encode()), "event", event, replay)
        line = '{"jsonrpc":"2.0","method":"receive","params":' + event.data + "}\n"
        return _Frame(line.encode(), "notification", event)

    def _open(self, transport: str, sock: socket.socket, last_event_id: str | None) -> _Conn:
        """A new client: its replay first, then whatever was pending (now received)."""
        conn = _Conn(next(self._conn_ids), transport, sock, time.monotonic(), last_event_id)
        if transport == "sse":
            headers = ("HTTP/1.1 200 OK\r\n"
                       f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
                       "Content-Type: text/event-stream\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
            conn.outbox.append(_Frame(headers.encode("latin-1"), "headers"))
            if last_event_id is not None:
                after = self._sequence(last_event_id)
                for event in self._buffer:
                    if event.seq > after:
                        conn.outbox.append(self._event_frame(conn, event, replay=True))
        self._conns.append(conn)
        for envelope in self._pending:
            self._receive(envelope)
        self._pending.clear()
        self._cond.notify_all()
        return conn

    def _sequence(self, event_id: str) -> int:
        """As SseEventBuffer.getSequence: this run's sequence, else 0 (everything)."""
        prefix = f"{self._run}-"
        if event_id.startswith(prefix) and event_id[len(prefix) :].isdigit():
            return int(event_id[len(prefix) :])
        return 0

    def _refuse(self, method: str, kind: str, transport: str, code: int | None = None,
                message: str | None = None, http_status: int | None = None) -> None:  # fmt: skip
        self._refused.append({"method": method, "kind": kind, "code": code, "message": message,
                              "http_status": http_status, "transport": transport,
                              "at": time.monotonic()})  # fmt: skip
        self._cond.notify_all()

    # -- writing to clients (one writer per connection) ------------------------------------

    def _pump(self, conn: _Conn) -> None:
        """Write what is queued for `conn` (and an event stream's keep-alives) until it
        closes; hold everything while deaf."""
        next_keepalive = time.monotonic() + self.keepalive
        try:
            while True:
                with self._cond:
                    frames, ending = self._next_frames(conn, next_keepalive)
                    if frames is None:
                        return
                    self._writing += 1
                try:
                    ok = self._write(conn, frames, ending)
                finally:
                    with self._cond:
                        self._writing -= 1
                        self._cond.notify_all()
                if ending or not ok:
                    return
                if any(f.kind == "keepalive" for f in frames):
                    next_keepalive = time.monotonic() + self.keepalive
        finally:
            with self._cond:
                if conn.closed_at is None:
                    conn.closed_at = time.monotonic()
                    conn.closed_by = conn.closed_by or ("stop" if self._closing else "write")
                self._cond.notify_all()
            shut(conn.sock)

    def _next_frames(self, conn: _Conn, next_keepalive: float) -> tuple[list[_Frame] | None, bool]:
        """(the frames to write, whether the connection ends after them); (None, _): it
        is closed."""
        while True:
            if self._closing or conn.closed_at is not None:
                return None, False
            if conn.close_now:
                frames = conn.outbox[:] if conn.graceful and not self._deaf else []
                conn.outbox.clear()
                return frames, True
            timeout: float | None = None
            if not self._deaf:
                if conn.outbox:
                    frames = conn.outbox[:]
                    conn.outbox.clear()
                    return frames, False
                if conn.transport == "sse":
                    now = time.monotonic()
                    if now >= next_keepalive:
                        return [_Frame(_chunk(b":\n"), "keepalive")], False
                    timeout = next_keepalive - now
            self._cond.wait(timeout)

    def _write(self, conn: _Conn, frames: list[_Frame], ending: bool) -> bool:
        """Write `frames`, each recorded just before its bytes go (so a client never has
        what the fake has not recorded); False: the client is gone."""
        for frame in frames:
            with self._cond:
                record = self._writing_frame(conn, frame)
            try:
                conn.sock.sendall(frame.data)
            except OSError:
                if record is not None:
                    with self._cond:
                        record["failed"] = True
                return False
        if ending and conn.graceful and conn.transport == "sse":
            try:
                conn.sock.sendall(_chunk(b""))
            except OSError:
                return False
        return True

    def _writing_frame(self, conn: _Conn, frame: _Frame) -> dict[str, Any] | None:
        record = None
        if frame.kind == "keepalive":
            conn.keepalives += 1
        elif frame.event is not None:
            conn.events += 1
            record = {
                "id": frame.event.id if conn.transport == "sse" else None,
                "timestamp": frame.event.envelope.get("timestamp"), "stream": conn.id,
                "transport": conn.transport, "replay": frame.replay, "failed": False,
                "at": time.monotonic(),
            }  # fmt: skip
            self._delivered.append(record)
        self._cond.notify_all()
        return record

    def _watch(self, conn: _Conn) -> None:
        """Read (and ignore) what the client sends on a stream until it closes it."""
        try:
            while conn.sock.recv(65536):
                pass
        except OSError:
            pass
        self._client_closed(conn)

    def _client_closed(self, conn: _Conn) -> None:
        with self._cond:
            if conn.closed_at is None:
                conn.closed_at = time.monotonic()
                conn.closed_by = conn.closed_by or "client"
            self._cond.notify_all()

    # -- serving: HTTP ------------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return Reply(200, _error(None, INTERNAL_ERROR, _MESSAGES[INTERNAL_ERROR]))

    def _http_rpc(self, request: TrackedHandler, raw: bytes) -> Reply:
        if not (request.headers.get("content-type") or "").startswith("application/json"):
            return Reply(415)
        try:
            parsed = json.loads(raw)
        except ValueError:
            return Reply(200, _error(None, PARSE_ERROR, _UNPARSED))
        answer = self._rpc(parsed, "http")
        if answer.http_status is not None:
            return Reply(answer.http_status)
        return Reply(201) if answer.response is None else Reply(200, answer.response)

    def _check(self, request: TrackedHandler, raw: bytes) -> Reply:
        return self._http_fault("check") or Reply(200)

    def _http_fault(self, method: str) -> Reply | None:
        with self._cond:
            fault = self._faults.take(method, matches=lambda target: target == _HTTP_STATUS)
            if fault is None:
                return None
            self._refuse(method, fault.kind, "http", http_status=fault.http_status)
            return Reply(fault.http_status)

    def _serve_socket(self, request: TrackedHandler) -> Reply | None:
        """GET /api/v1/events: the stream, from its headers to its end, on this thread."""
        query = parse_qs(urlsplit(request.path).query, keep_blank_values=True)
        account = query.get("account", [""])[0]
        if account and account != self.account:
            return Reply(400)
        refusal = self._http_fault("events")
        if refusal is not None:
            return refusal
        with self._cond:
            if self._closing:
                return None
            conn = self._open("sse", request.connection, request.headers.get("last-event-id"))
        threading.Thread(target=self._watch, args=(conn,), daemon=True).start()
        self._pump(conn)
        return None

    # -- serving: TCP -----------------------------------------------------------------------

    def _accept_loop(self, server: socket.socket) -> None:
        while True:
            try:
                sock, _ = server.accept()
            except OSError:
                return
            with self._cond:
                if self._closing:
                    shut(sock)
                    sock.close()
                    return
            threading.Thread(target=self._serve_tcp, args=(sock,), daemon=True).start()

    def _serve_tcp(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._cond:
            conn = self._open("tcp", sock, None)
        writer = threading.Thread(target=self._guarded, args=(self._pump, conn), daemon=True)
        writer.start()
        try:
            self._read_lines(conn)
        except Exception:  # a bug of the fake: record, cut this connection
            self._record_internal_error(traceback.format_exc())
        finally:
            self._client_closed(conn)
            shut(sock)
            writer.join(10)
            sock.close()

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            self._record_internal_error(traceback.format_exc())

    def _read_lines(self, conn: _Conn) -> None:
        buffer = bytearray()
        scanned = 0  # bytes of `buffer` known to hold no newline (a long line comes in pieces)
        while True:
            try:
                data = conn.sock.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while (end := buffer.find(b"\n", scanned)) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                scanned = 0
                answer = self._rpc_line(line)
                if answer is None:
                    continue
                with self._cond:
                    if not conn.open:
                        return
                    conn.outbox.append(_Frame(answer, "answer"))
                    self._cond.notify_all()
            scanned = len(buffer)

    def _rpc_line(self, line: bytes) -> bytes | None:
        if not line.strip():
            return None
        try:
            parsed = json.loads(line)
        except ValueError:
            response: dict[str, Any] | None = _error(None, PARSE_ERROR, _UNPARSED)
        else:
            response = self._rpc(parsed, "tcp").response
        return None if response is None else (compact(response) + "\n").encode()

    # -- JSON-RPC -----------------------------------------------------------------------------

    def _rpc(self, request: Any, transport: str) -> _Answer:
        if isinstance(request, list):
            return _Answer(_error(None, INVALID_REQUEST, "Batch requests are not supported"))
        if not isinstance(request, dict):
            return _Answer(_error(None, INVALID_REQUEST, "request must be a JSON object"))
        method = request.get("method")
        if not isinstance(method, str) or not method:
            return _Answer(_error(None, INVALID_REQUEST, "method field must be set"))
        rid = request.get("id")
        params = request.get("params")
        with self._cond:
            self._calls.append({"method": method, "params": copy_json(params), "id": rid,
                                "transport": transport, "at": time.monotonic()})  # fmt: skip
            self._cond.notify_all()
            try:
                if params is None:
                    params = {}
                if not isinstance(params, dict):
                    raise _RpcError(INVALID_PARAMS, "params must be a JSON object")
                result = self._call(method, params, transport)
            except _RpcError as exc:
                response = _error(rid, exc.code, exc.message, exc.data)
            except _HttpFault as exc:
                return _Answer(None, exc.status)
            else:
                response = {"jsonrpc": "2.0", "result": result, "id": rid}
        return _Answer(None if rid is None else response)

    def _call(self, method: str, params: dict[str, Any], transport: str) -> Any:
        if method not in _GLOBAL_METHODS and method not in _ACCOUNT_METHODS:
            raise _RpcError(METHOD_NOT_FOUND, "Method not implemented")
        if method in _ACCOUNT_METHODS:
            account = params.get("account")
            if account is None:
                raise _RpcError(INVALID_PARAMS, "Method requires valid account parameter")
            if str(account) != self.account:
                raise _RpcError(INVALID_PARAMS, "Specified account does not exist")
        fault = self._faults.take(
            method,
            matches=lambda target: (
                target in (None, transport) or (transport == "http" and target == _HTTP_STATUS)
            ),
        )
        if fault is not None and fault.kind == "http":
            self._refuse(method, "http", transport, http_status=fault.http_status)
            raise _HttpFault(fault.http_status)
        if fault is not None and fault.kind == "error":
            self._refuse(method, "error", transport, fault.code, fault.message)
            raise _RpcError(fault.code, fault.message, copy_json(fault.data))
        if method == "version":
            return {"version": VERSION}
        if method == "listAccounts":
            return [{"number": self.account}]
        if method == "send":
            return self._send(params, transport, fault)
        if method == "sendTyping":
            return self._send_typing(params, transport)
        if method == "getAttachment":
            return self._get_attachment(params)
        if method == "listGroups":
            return [g.info(self) for g in self._groups.values()]
        return self._trust(params)

    def _address(self, identifier: str) -> dict[str, Any]:
        """The recipient address of a number or a known uuid."""
        for who in self._people.values():
            if identifier == who["uuid"]:
                return {"uuid": who["uuid"], "number": who["number"], "username": None}
        if _looks_like_uuid(identifier):
            return {"uuid": identifier, "number": None, "username": None}
        return {"uuid": self._uuid(identifier), "number": identifier, "username": None}

    def _targets(self, params: dict[str, Any], *, groups_message: str = "") -> tuple[
        list[str], list[str], list[tuple[dict[str, Any], str | None]]
    ]:  # fmt: skip
        """(recipients, group ids, [(address, group id)] to send to); -1 for none or an
        unknown group."""
        recipients = _strings(params, "recipient")
        group_ids = _strings(params, "groupId")
        note_to_self = params.get("noteToSelf") is True
        if not recipients and not group_ids and not note_to_self:
            raise _RpcError(USER_ERROR, "No recipients given")
        targets = [(self._address(r), None) for r in recipients]
        if note_to_self:
            targets.append((self._address(self.account), None))
        for group_id in group_ids:
            found = self._groups.get(group_id)
            if found is None:
                raise _RpcError(USER_ERROR, f"{groups_message}Group not found: {group_id}")
            targets += [(self._address(m), group_id) for m in found.members
                        if m != self.account]  # fmt: skip
        return recipients, group_ids, targets

    def _send(self, params: dict[str, Any], transport: str, fault: _Fault | None) -> Any:
        recipients, group_ids, targets = self._targets(params)
        message = params.get("message")
        if message is None:
            message = ""
        if not isinstance(message, str):
            raise _RpcError(INVALID_PARAMS, "message must be a string")
        styles = _strings(params, "textStyle")
        styled = []
        for spec in styles:
            match = _SPEC.fullmatch(spec)
            if match is None:
                raise _RpcError(USER_ERROR, f"Invalid textStyle syntax ({spec}) expected "
                                            "'start:length:STYLE'")  # fmt: skip
            if match.group(3) not in STYLES:
                raise _RpcError(USER_ERROR, f"Invalid style: {match.group(3)}")
            start, length = int(match.group(1)), int(match.group(2))
            styled.append([match.group(3), utf16_slice(message, start, length)])
        mentions = _strings(params, "mention")
        for spec in mentions:
            if _SPEC.fullmatch(spec) is None:
                raise _RpcError(USER_ERROR, f"Invalid mention syntax ({spec}) expected "
                                            "'start:length:recipientNumber'")  # fmt: skip
        attachments = _strings(params, "attachment")
        quote_ts = _integer(params, "quoteTimestamp")
        edit_ts = _integer(params, "editTimestamp")
        quote_author = _string(params, "quoteAuthor")
        quote_message = _string(params, "quoteMessage")
        if not message and not attachments and quote_ts is None and "sticker" not in params:
            raise _RpcError(USER_ERROR, _EMPTY)
        files = [self._attachment_file(a) for a in attachments]  # read as signal-cli sends
        for file in files:  # uploaded before the message goes: too large, nothing is sent
            if file["size"] > self.max_upload:
                text = (f"Failed to send message: [413] Response: Response{{protocol=h2, "
                        f"code=413, message=, url={_CDN}{secrets.token_urlsafe(15)}}} "
                        "(NonSuccessfulResponseCodeException)")  # fmt: skip
                self._refuse("send", "too_large", transport, INTERNAL_ERROR, text)
                raise _RpcError(INTERNAL_ERROR, text)
        ts = self._timestamp()

        def result(address: dict[str, Any], group_id: str | None, kind: str) -> dict:
            entry: dict[str, Any] = {"recipientAddress": address}
            if group_id is not None:
                entry["groupId"] = group_id
            entry["type"] = kind
            return entry

        if fault is not None and fault.kind == "rate_limit":
            results = [result(a, g, "RATE_LIMIT_FAILURE") | {"retryAfterSeconds":
                                                              fault.retry_after}
                       for a, g in targets]  # fmt: skip
            message_text, code = _MESSAGES[RATE_LIMIT_ERROR], fault.code or RATE_LIMIT_ERROR
            self._refuse("send", "rate_limit", transport, code, message_text)
            raise _RpcError(code, message_text,
                            {"response": {"timestamp": ts, "results": results}})  # fmt: skip
        results = []
        for address, group_id in targets:
            untrusted = address["number"] in self._untrusted or address["uuid"] in self._untrusted
            results.append(result(address, group_id,
                                  "IDENTITY_FAILURE" if untrusted else "SUCCESS"))  # fmt: skip
        if results and not any(r["type"] == "SUCCESS" for r in results):
            message_text = _MESSAGES[UNTRUSTED_KEY_ERROR]
            self._refuse("send", "untrusted", transport, UNTRUSTED_KEY_ERROR, message_text)
            raise _RpcError(UNTRUSTED_KEY_ERROR, message_text,
                            {"response": {"timestamp": ts, "results": results}})  # fmt: skip
        self._sent.append({
            "recipients": recipients, "group_id": group_ids[0] if group_ids else None,
            "group_ids": group_ids, "note_to_self": params.get("noteToSelf") is True,
            "message": message, "text_styles": styles, "styled": styled,
            "mentions": mentions, "quote_timestamp": quote_ts, "quote_author": quote_author,
            "quote_message": quote_message, "edit_timestamp": edit_ts,
            "attachments": attachments, "timestamp": ts, "results": copy_json(results),
            "transport": transport, "at": time.monotonic(),
        })  # fmt: skip
        for file in files:
            self._uploads.append({
                "recipients": recipients, "group_id": group_ids[0] if group_ids else None,
                **file, "message": message, "timestamp": ts, "transport": transport,
                "at": time.monotonic(),
            })  # fmt: skip
        self._cond.notify_all()
        return {"timestamp": ts, "results": results}

    def _attachment_file(self, attachment: str) -> dict[str, Any]:
        """What one attachment of a send holds (`filename`, `content_type`, `size`,
        `sha256`, `source`, `content`); -32603 when signal-cli could not read it."""
        try:
            if attachment.startswith("data:"):
                filename, content_type, data = _parse_data_uri(attachment)
                source = "data"
            else:
                path = Path(attachment)
                filename, source = path.name, "path"
                content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                size = path.stat().st_size
                if size > self.max_upload:  # measured, not read: refused for its size
                    return {"filename": filename, "content_type": content_type, "size": size,
                            "sha256": None, "source": source, "content": None}  # fmt: skip
                data = path.read_bytes()
        except (ValueError, OSError) as exc:
            shown = attachment if len(attachment) <= 64 else attachment[:64] + "…"
            raise _RpcError(INTERNAL_ERROR, f"Failed to send message: {shown}: {exc} "
                                            "(AttachmentInvalidException)") from None  # fmt: skip
        return {"filename": filename, "content_type": content_type, "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(), "source": source,
                "content": data if len(data) <= KEPT_CONTENT else None}  # fmt: skip

    def _send_typing(self, params: dict[str, Any], transport: str) -> Any:
        recipients, group_ids, _ = self._targets(params, groups_message="Failed to send to "
                                                                        "group: ")  # fmt: skip
        stop = params.get("stop")
        if stop is not None and not isinstance(stop, bool):
            raise _RpcError(INVALID_PARAMS, "stop must be a boolean")
        self._typing_sent.append({"recipients": recipients,
                                  "group_id": group_ids[0] if group_ids else None,
                                  "stop": bool(stop), "transport": transport,
                                  "at": time.monotonic()})  # fmt: skip
        self._cond.notify_all()
        return {}

    def _get_attachment(self, params: dict[str, Any]) -> Any:
        attachment_id = _string(params, "id")
        if attachment_id is None:
            raise _RpcError(INVALID_PARAMS, "id is required")
        data = self._attachments.get(attachment_id)
        if data is None:
            raise _RpcError(USER_ERROR, f"Could not find attachment with ID: {attachment_id}")
        self._attachment_reads.append({"id": attachment_id,
                                       "recipient": params.get("recipient"),
                                       "group_id": params.get("groupId"), "size": len(data),
                                       "at": time.monotonic()})  # fmt: skip
        self._cond.notify_all()
        return {"data": base64.b64encode(data).decode()}

    def _trust(self, params: dict[str, Any]) -> Any:
        recipient = params.get("recipient")
        if isinstance(recipient, list) and len(recipient) == 1:
            recipient = recipient[0]
        if not isinstance(recipient, str) or not recipient:
            raise _RpcError(INVALID_PARAMS, "recipient must be one number")
        all_keys = params.get("trustAllKnownKeys") is True
        safety_number = _string(params, "verifiedSafetyNumber")
        if not all_keys and safety_number is None:
            raise _RpcError(USER_ERROR, "You need to specify the fingerprint/safety number you "
                                        "have verified with -v SAFETY_NUMBER")  # fmt: skip
        address = self._address(recipient)
        self._untrusted.discard(recipient)
        self._untrusted.discard(address["uuid"])
        if address["number"] is not None:
            self._untrusted.discard(address["number"])
        self._trusted.append({"recipient": recipient, "all_keys": all_keys,
                              "safety_number": safety_number, "at": time.monotonic()})  # fmt: skip
        self._cond.notify_all()
        return {}


class _HttpFault(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _parse_data_uri(uri: str) -> tuple[str | None, str, bytes]:
    """(filename, content type, bytes) of a data URI as signal-cli's DataURI reads it;
    ValueError when it is not one."""
    header, comma, data = uri.partition(",")
    match = _DATA_URI.fullmatch(header + comma)
    if not data or match is None:
        raise ValueError("The given string is not a valid data URI.")
    parameter = _PARAMETER.match(match.group("parameters") or "")
    filename = unquote_plus(parameter.group("value")) if parameter and parameter.group(
        "key") == "filename" else None  # fmt: skip
    if match.group("base64") is None:
        content = unquote_plus(data).encode()
    else:
        try:
            content = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
        except binascii.Error as exc:
            raise ValueError(f"Illegal base64 character: {exc}") from None
    return filename, match.group("type") or "text/plain", content


def _looks_like_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _strings(params: dict[str, Any], name: str) -> list[str]:
    """A list parameter as signal-cli reads one: one value or a list, under its name or
    its plural."""
    value = params.get(name)
    if value is None:
        value = params.get(name + "s")
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise _RpcError(INVALID_PARAMS, f"{name} must be a string or a list of strings")
    return list(values)


def _string(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise _RpcError(INVALID_PARAMS, f"{name} must be a string")
    return value


def _integer(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise _RpcError(INVALID_PARAMS, f"{name} must be an integer")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.signal",
        description="A fake signal-cli daemon (HTTP JSON-RPC and events): prints its base "
        "URL, serves until killed. GET /_fake/state tells the TCP address with --tcp.",
    )
    parser.add_argument("--tcp", action="store_true", help="serve JSON-RPC over TCP too")
    parser.add_argument("--keepalive", type=float, default=KEEPALIVE,
                        help="seconds between keep-alives on event streams")  # fmt: skip
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    serve_until_killed(FakeSignal(tcp=args.tcp, keepalive=args.keepalive, port=args.port))


if __name__ == "__main__":
    main()
