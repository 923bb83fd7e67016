"""A fake Discord on 127.0.0.1: the REST API (v10) over HTTP and the Gateway over a
WebSocket, both on one port, for the tests of the Discord adapter and the benches.

REST, under `{url}/api/v10/`, header `Authorization: Bot <token>` (otherwise 401
`{"message": "401: Unauthorized", "code": 0}`); errors are `{"message", "code"}`:

    GET  gateway/bot               -> {"url": "ws://127.0.0.1:PORT/gateway", "shards": 1,
                                       "session_start_limit": {...}}
    GET  users/@me                 -> the bot user
    POST channels/{id}/messages    {content, message_reference?, components?, nonce?,
                                   enforce_nonce?, allowed_mentions?} -> 200 a Message
                                   (`id`: an increasing snowflake string; its `components`
                                   as sent, its `nonce` if given); empty (without
                                   components or files) or over 2000 characters, or
                                   components Discord refuses, or an allowed_mentions
                                   it refuses (see below), or a nonce not an integer
                                   or a string of at most 25 characters -> 400 code
                                   50035 "Invalid Form Body". Or multipart/form-data
                                   (with files, below). A body over `max_upload` bytes
                                   (default 10 MiB, a bot's limit in an unboosted
                                   server) -> 413 code 40005 "Request entity too large".
    PATCH channels/{id}/messages/{message}  {content?, components?, embeds?,
                                   allowed_mentions?} -> 200 the Message as it is now:
                                   each field given (null: emptied) replaces the
                                   message's (`components: []` takes its buttons away),
                                   the others are kept; `edited_timestamp` set. Checked
                                   as a create (the message it would become: empty, over
                                   2000, bad components or mentions -> 400 50035); the
                                   same content again is a 200 too (Discord has no "not
                                   modified"). A message not in that channel (never
                                   there, or deleted) -> 404 code 10008 "Unknown
                                   Message"; another author's -> 403 code 50005 "Cannot
                                   edit a message authored by another user".
    POST channels/{id}/typing      -> 204
    POST interactions/{id}/{token}/callback  {type, data?} -> 204; needs no Authorization
                                   (the token in the path is the credential; a bot header
                                   is taken too). Unknown id or token, or later than 3 s
                                   after the press -> 404 code 10062 "Unknown interaction";
                                   a second one -> 400 code 40060 "Interaction has already
                                   been acknowledged."; a type that cannot answer a button
                                   press (only 4, 5, 6, 7 and 9 can) -> 400 code 50035.

Files (Discord's "Uploading Files"): a create in multipart/form-data carries a part
`payload_json` (the JSON body as above, with `attachments: [{"id": n, "filename"?,
"description"?}]`) and file parts `files[0]`, `files[1]` ... (each with a filename and a
content type; any other part with a filename is taken as a file too; without
payload_json the other parts are the fields, as strings). The entry whose `id` is n
names `files[n]` (its `filename` replaces the part's; its `description` is kept); a
file without an entry is taken too, as Discord takes it. The Message's `attachments`
list the files (`id`, `filename`, `size`, `url`, `proxy_url`, `content_type`: the
part's, else guessed from the filename; `description`), which the CDN then serves; the
content may be empty. More than 10 files -> 400 50035; a body that is not multipart
-> 400 50035; a payload_json that is not JSON -> 400 50109. Each file is recorded in
`uploads`.

Nonces: a create with `nonce` and `enforce_nonce: true` whose nonce an earlier create
in the same channel had, within NONCE_WINDOW (300 s on `clock`), is answered 200 with
that message as it is now (JSON or multipart alike): no new message, nothing in `sent`
or `uploads`. Without `enforce_nonce` a nonce is only echoed in the Message.

The CDN, on the same port, needs no Authorization (as Discord's): `GET
/attachments/<channel>/<attachment>/<filename>?ex=<hex expiry>&is=<hex issued>&hm=<hex
HMAC>&` (an attachment's `url`; `proxy_url` is the same link) answers the file with its
content type, written in 256 KiB pieces; each download is counted in `downloads`. A link
whose `hm` is missing or does not match (or that expired after 24 h, or names another
file) answers 404 "This content is no longer available." (text), as Discord's does. A
test adds a user's file with `add_attachment(content, filename, content_type=None,
size=None)` (channel "0" in its path) and sends it with `message(...,
attachments=[...])`.

Mentions, as Discord makes them: a message's `mention_everyone` (its content says
@everyone or @here), `mentions` (the users `<@id>` or `<@!id>` names, as user objects, and
for a reply the replied message's author unless that is the bot) and `mention_roles`
(`<@&id>`) are whom it pings. Without `allowed_mentions` everything the content names
counts (the bot may mention everyone) and a reply pings its author; with it, only what
its `parse` ("everyone", "users", "roles") or its `users` / `roles` ids allow, and the
replied author only with `replied_user: true`. An edit that gives `content` or
`allowed_mentions` sets the fields the same way (pinging nobody anew: Discord notifies
on creates only). An
`allowed_mentions` that is not an object, a `parse` value not one of those, `users` or
`roles` not a list of at most 100 ids, "users" in `parse` together with a `users` list
(or "roles" with `roles`), a `replied_user` not a boolean -> 400 code 50035.

Components are checked as Discord checks them: at most 5 action rows (type 1) of 1 to 5
components; a button (type 2) has a style 1-5, a label of at most 80 characters (or an
emoji), and a custom_id of 1 to 100 characters unique in the message (a link button,
style 5, has a `url` instead).

Every REST answer carries `X-RateLimit-Limit`, `-Remaining`, `-Reset`, `-Reset-After`
and `-Bucket` (one bucket per route and channel, as Discord's are per channel:
"msg-<channel>", "edit-<channel>", "typing-<channel>", "gateway-bot", "users-me");
`bucket_limit` calls per `bucket_window` seconds, counted but not enforced: only
`rate_limit()` answers 429, with `Retry-After`, `X-RateLimit-Scope` (and
`X-RateLimit-Global: true` when global) and `{"message": "You are being rate
limited.", "retry_after": s, "global": bool}`. `fail()` answers other errors. The CDN
is no REST: none of these headers, no faults, not in `calls`.

Gateway: a WebSocket at `{ws}/gateway` (the URL from gateway/bot) and at
`{ws}/resume` (the `resume_gateway_url` in READY); both behave alike (the path is
recorded in `sockets`), a query string (`?v=10&encoding=json`) is accepted. Frames
are JSON text `{"op", "d", "s", "t"}`.

- `press()` dispatches an `INTERACTION_CREATE` (type 3, a button press) shaped like
  Discord's: `id`, `application_id`, `type`, `data {custom_id, component_type: 2}`,
  `guild_id`, `guild` and `member {user, ...}` in a guild or `user` in a DM,
  `channel_id`, `channel {id, type, guild_id?}`, `token`, `version: 1`, `message` (the
  message as created), `app_permissions`, `locale`, `entitlements`, `context`.
- On connect: `op 10 Hello {"heartbeat_interval": ms}`.
- `op 1` heartbeat: recorded in `heartbeats`; answered `op 11` unless the socket is a
  zombie (`zombie()`).
- `op 2 Identify {token, intents, properties}`: a wrong token closes with 4004; a
  second Identify on one socket closes with 4005. Otherwise a new session: `READY`
  (`s` = 1) with `{v, session_id, resume_gateway_url, user, guilds: [], application}`.
  The newest session is the *current* one: injected events go to it.
- `op 6 Resume {token, session_id, seq}`: an unknown or invalidated session gets
  `op 9` (`d: false`) and the socket stays open (Identify may follow); a `seq` ahead of
  the session closes with 4009. A known session: every dispatch of it with `s > seq`
  (READY and RESUMED aside) is sent again, then `RESUMED` (a dispatch with the next
  `s`). The socket the session was on before (if still open) no longer gets its events.
- A client that closes the socket its session is on with 1000 or 1001 ends the session,
  as Discord does (a later Resume gets `op 9`, `d: false`, and events injected meanwhile
  are `lost`); any other close code, or a connection cut without a close frame, keeps
  it resumable.
- Any other op (or a non-JSON frame) before Identify/Resume closes with 4003 (not
  authenticated); an unknown op with 4001; undecodable JSON with 4002.

Each session numbers its dispatches 1, 2, 3 ... and keeps them all. An event injected
while the session's socket is closed, cut, zombie or not yet resumed waits in the
session: a Resume replays it (so a message sent during a gap is delivered exactly once
to a client that resumes). A new session (Identify) does not get the events of an
earlier one, as on Discord: a client that must identify anew has lost them, and
events injected while there is no valid session at all are lost too (`lost`). The
fake keeps its state for its whole life: sessions, messages and interactions outlive
client restarts.

The test drives the fake from its own thread (every method is thread-safe):
`message()` (with `attachments` from `add_attachment()`) and `dispatch()` put events
in; `press(message, button, user_id=...)` presses a button of a message hermes sent
(the message as `sent` records it, or its id; the button by its custom_id, i.e.
hermes's command, or its label) and returns the
interaction's id, `redeliver(interaction_id)` dispatches that press again (as a Resume
from an earlier sequence would); `rate_limit()` and `fail()` answer the next matching
REST calls with errors (route "messages" for creates, "edits" for edits:
`rate_limit(channel, retry_after=2.5, route="edits")`); `delete_message(id)` deletes a
message as a moderator would (an edit of it then: 10008); `zombie()`, `close(code)`,
`reconnect()`, `invalid_session()` and `drop()` trouble the current socket; `flap()`
makes every new socket close right after Hello (a flapping gateway) until `unflap()`.
It reads what the client did in `sent`, `edits` (each edit taken: `channel_id`,
`message_id`, `content` and `components` as given, None when left out, `at`),
`typing`, `interactions`, `callbacks`, `refused`, `calls`, `rate_limited` (how many
429s it answered, on any route), `uploads` (each file the bot uploaded: `channel_id`,
`message_id`, `attachment_id`, `filename`, `description`, `size`, `sha256`,
`content_type`, `text`, `message_reference`, `at`, `content`: the bytes up to 1 MiB,
else None), `downloads` (the attachment ids the CDN served, in order), `identifies`
(and `identify_payloads`, with their times), `resumes`, `sessions`, `heartbeats`,
`closes`, `sockets`, `dispatches` ...; what a user sees now in a channel with
`messages_in(channel)` (the bot's messages there, oldest first, as Discord keeps them
after edits: `id`, `content`, `components`, `attachments`, `edited_timestamp` ...); and
waits for it with the `wait_*` helpers (`wait_edits(count, message_id=)` for edits,
`wait_uploads(count)`, `wait_downloads(count)`), which block on a condition (no
sleeping) and raise TimeoutError naming what they waited for.
`shutdown()` (or leaving the `with` block) stops the fake at once; `close(code)` closes
a Gateway socket.

Where the fake knowingly differs from Discord:
- `ws://` / `http://` on 127.0.0.1; no zlib / etf / compression; the Identify token is
  compared as is (the raw token, no "Bot " prefix).
- The fake never closes a socket for missing heartbeats, never sends heartbeat
  requests (op 1) of its own, and enforces no Identify or gateway send limits; intents
  are recorded, not checked (no 4013/4014).
- RESUMED carries the next sequence number of the session (and counts as a dispatch
  of it); it is never replayed.
- MESSAGE_CREATE carries an extra `channel_type` (1 DM, 0 guild text, 11 public
  thread...) which Discord leaves out: use `guild_id` to tell a DM from a guild.
- The 3 seconds an interaction has for its callback are measured on the fake's
  `clock` (time.monotonic unless a test passes one it moves on), from `press()`.
  Interaction tokens never expire otherwise, and no follow-up webhooks exist.
- An empty message answers 50035 (Discord: 50006 "Cannot send an empty message");
  any channel id is taken; rate-limit buckets are counted, never enforced; the
  bucket names are readable ("msg-<channel>"), not opaque hashes.
- The bot's own messages, created or edited, and deletions (`delete_message`) are not
  dispatched back (Discord sends MESSAGE_CREATE, MESSAGE_UPDATE, MESSAGE_DELETE).
- The fake closes its sockets with the chosen code (`close()`) or 1001 when
  stopping; `drop()` cuts the TCP connection with no close frame.
- The CDN is on the fake's port (`url` and `proxy_url` alike), serves no ranges or image
  resizing, and an attachment added with a `size` larger than its content serves the
  content padded with zeros to `size`. Filenames are kept as given (Discord replaces
  spaces and strips some characters); a 413 comes after the body was read whole.

In its own process:

    python -m tests.fakes.discord [--token T] [--heartbeat-interval 41.25] [--max-upload N]

prints its base URL on one line and serves until killed. Another process drives it
over HTTP: `POST {url}/_fake/<name>` with a JSON object of keyword arguments calls one
of message, dispatch, press, redeliver, rate_limit, fail, clear_faults, delete_message,
messages_in, zombie, unzombie, close, reconnect, invalid_session, drop, flap, unflap,
add_attachment (its content a string, sent in UTF-8) (answer `{"ok": true, "result":
<return value>}`), and `GET {url}/_fake/state` answers the counters and the records
(an upload's bytes as base64 text, `content_base64`).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import itertools
import json
import math
import mimetypes
import re
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import attrs

from tests.fakes.kit import infos, observed, serve_until_killed
from tests.fakes.local_http import (
    Blob,
    ErrorShape,
    Part,
    Reply,
    TrackedHandler,
    copy_json,
    form_parts,
    match,
    routes,
)
from tests.fakes.websocket import WebSocket, WebSocketFake

TOKEN = "fake-discord-token"
BOT_ID = "100000000000000001"
BOT_NAME = "hermes"
APPLICATION_ID = BOT_ID
MAX_CONTENT = 2000
MAX_UPLOAD = 10 * 1024 * 1024  # bytes a bot's request may carry in an unboosted server
MAX_FILES = 10  # files a message may carry
KEPT_CONTENT = 1024 * 1024  # an upload's bytes are in its record up to this size
NONCE_WINDOW = 300.0  # seconds (on `clock`) an enforced nonce finds its earlier message
LINK_LIFETIME = 24 * 3600  # seconds a signed CDN link is good for
GONE = "This content is no longer available."  # the CDN's 404 for a link not (or no more) good
ACK_WITHIN = 3.0  # seconds an interaction has for its callback
MENTION_KINDS = frozenset({"everyone", "users", "roles"})  # allowed_mentions' `parse`
_EVERYONE_MENTION = re.compile(r"@(?:everyone|here)\b")
_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")
MESSAGE_COMPONENT = 3  # the interaction type of a button press
COMPONENT_CALLBACKS = frozenset({4, 5, 6, 7, 9})  # callback types a press may get
API_PREFIX = "/api/v10/"
STOP_CODE = 1001  # the code of the close frames the fake sends when it stops
ENDING_CODES = frozenset({1000, 1001})  # a client's close with these ends its session
# close codes after which the session cannot be resumed (Discord's docs)
INVALIDATING_CODES = frozenset({4004, 4007, 4009, 4010, 4011, 4012, 4013, 4014})
# opcodes
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = (
    0, 1, 2, 6, 7, 9, 10, 11,
)  # fmt: skip
_CLIENT_OPS = frozenset({1, 2, 3, 4, 6, 8, 31})  # what a client may send
BOT_USER = {
    "id": BOT_ID, "username": BOT_NAME, "discriminator": "0", "global_name": None,
    "avatar": None, "bot": True,
}  # fmt: skip
_EPOCH_MS = 1_420_070_400_000  # Discord's epoch


@attrs.define
class _Fault:
    status: int
    code: int
    message: str
    retry_after: float | None = None
    global_: bool = False


@attrs.define(eq=False)
class _Session:
    id: str
    created_at: float
    seq: int = 0
    valid: bool = True
    dispatches: list[dict[str, Any]] = attrs.Factory(list)  # full frames, in order
    socket: _Socket | None = None  # the socket that gets its events now
    last: _Socket | None = None  # the newest socket that took it (Identify or Resume)
    resumes: int = 0

    def info(self) -> dict[str, Any]:
        return {
            "session_id": self.id, "seq": self.seq, "valid": self.valid,
            "socket": None if self.socket is None else self.socket.id,
            "resumes": self.resumes, "created_at": self.created_at,
        }  # fmt: skip


@attrs.define(eq=False, kw_only=True)
class _Socket(WebSocket):
    close_code: int = STOP_CODE
    close_reason: str = "closed"
    session: _Session | None = None
    authenticated: bool = False
    zombie: bool = False
    flap_code: int | None = None  # flapping: it takes no Identify or Resume, closes with this
    sent_seq: int = 0  # the highest `s` of the session put in the outbox
    detached: bool = False  # told to close: takes nothing new
    fake_close_code: int | None = None
    heartbeats: int = 0

    def info(self) -> dict[str, Any]:
        return {
            **super().info(), "path": self.path,
            "session_id": None if self.session is None else self.session.id,
            "zombie": self.zombie, "fake_close_code": self.fake_close_code,
            "heartbeats": self.heartbeats,
        }  # fmt: skip


@attrs.define(eq=False)
class _File:
    """A file on the fake's CDN: an attachment added by the test or uploaded by the bot."""

    id: str
    channel: str  # the channel in its path ("0" for one the test added)
    filename: str
    content_type: str
    content: bytes  # shared, never copied
    size: int  # served: `content`, then zeros up to `size`
    url: str

    def attachment(self) -> dict[str, Any]:
        """Discord's Attachment object for it."""
        return {
            "id": self.id, "filename": self.filename, "size": self.size, "url": self.url,
            "proxy_url": self.url, "content_type": self.content_type,
        }  # fmt: skip


_FILE_PART = re.compile(r"files\[(\d+)\]")


def _form(content_type: str, raw: bytes) -> tuple[Any, list[Part]]:
    """A multipart create's body (its `payload_json` part parsed, None if that is not
    JSON; without one, the other fields as strings) and its file parts (every part with a
    filename). ValueError for a body that is not multipart."""
    parts = form_parts(content_type, raw)
    files = [p for p in parts if p.filename is not None and p.name != "payload_json"]
    payload = next((p for p in parts if p.name == "payload_json"), None)
    if payload is not None:
        return _json_body(payload.data), files
    fields = {p.name: p.data.decode("utf-8", "replace") for p in parts
              if p.name is not None and p.filename is None}  # fmt: skip
    return fields, files


def _guess_type(filename: str) -> str:
    """The content type Discord gives a file of that name (text with its charset)."""
    guessed = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


_ERRORS = ErrorShape("message", code="code")


def _error(status: int, code: int, message: str) -> Reply:
    return _ERRORS.reply(status, message, code)


def _form_error(path: list[str], code: str, message: str) -> dict[str, Any]:
    """Discord's nested `errors` of a 50035 for one field, `path` from the top."""
    errors: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        errors = {key: errors}
    return errors


def _component_errors(components: Any) -> dict[str, Any] | None:
    """Discord's `errors` for a message's `components` it would refuse, or None."""
    if not isinstance(components, list) or len(components) > 5:
        return _form_error(["components"], "BASE_TYPE_BAD_LENGTH", "Must be 5 or fewer in length.")
    seen: set[str] = set()  # custom_ids are unique in a message
    for r, row in enumerate(components):
        where = ["components", str(r)]
        inner = row.get("components") if isinstance(row, dict) else None
        if not isinstance(row, dict) or row.get("type") != 1 or not isinstance(inner, list):
            return _form_error(where, "UNION_TYPE_CHOICES", 'Value of "type" must be one of (1,).')
        if not 1 <= len(inner) <= 5:
            return _form_error([*where, "components"], "BASE_TYPE_BAD_LENGTH",
                               "Must be between 1 and 5 in length.")  # fmt: skip
        for c, button in enumerate(inner):
            if not isinstance(button, dict) or button.get("type") != 2:
                continue  # a select menu or the like: not checked
            problem = _button_problem(button, seen)
            if problem is not None:
                return _form_error([*where, "components", str(c), *problem[:1]], *problem[1:])
    return None


def _button_problem(button: dict[str, Any], seen: set[str]) -> tuple[str, str, str] | None:
    """The field of a button Discord refuses, its error code and message; or None (its
    custom_id joins `seen`)."""
    style, label, custom_id = button.get("style"), button.get("label"), button.get("custom_id")
    if style not in (1, 2, 3, 4, 5):
        return "style", "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5}."
    if label is None and not button.get("emoji"):
        return "label", "BUTTON_LABEL_REQUIRED", "A label or an emoji is required."
    if label is not None and (not isinstance(label, str) or len(label) > 80):
        return "label", "BASE_TYPE_BAD_LENGTH", "Must be 80 or fewer in length."
    if style == 5:  # a link
        if not button.get("url") or custom_id is not None:
            return "url", "BUTTON_COMPONENT_URL_REQUIRED", "A link button has a url only."
        return None
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= 100:
        return "custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
    if custom_id in seen:
        duplicated = "Component custom id cannot be duplicated"
        return "custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", duplicated
    seen.add(custom_id)
    return None


def _mention_errors(allowed: Any) -> dict[str, Any] | None:
    """Discord's `errors` for an `allowed_mentions` it would refuse, or None (absent)."""
    where = ["allowed_mentions"]
    if allowed is None:
        return None
    if not isinstance(allowed, dict):
        return _form_error(where, "MODEL_TYPE_CONVERT", "Only dictionaries may be used.")
    parse = allowed.get("parse", [])
    if not isinstance(parse, list) or any(kind not in MENTION_KINDS for kind in parse):
        return _form_error([*where, "parse"], "BASE_TYPE_CHOICES",
                           "Value must be one of {'everyone', 'users', 'roles'}.")  # fmt: skip
    for kind in ("users", "roles"):
        ids = allowed.get(kind)
        if ids is None:
            continue
        if (
            not isinstance(ids, list)
            or len(ids) > 100
            or not all(isinstance(i, str) and i.isdigit() for i in ids)
        ):
            return _form_error([*where, kind], "BASE_TYPE_MAX_LENGTH",
                               "Must be 100 or fewer snowflakes in length.")  # fmt: skip
        if kind in parse:
            exclusive = f'parse:["{kind}"] and {kind}: [ids] are mutually exclusive.'
            return _form_error(where, "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", exclusive)
    if not isinstance(allowed.get("replied_user", False), bool):
        return _form_error([*where, "replied_user"], "BASE_TYPE_BOOLEAN",
                           "Must be either true or false.")  # fmt: skip
    return None


def _mentions(content: str, allowed: Any, replied: dict[str, Any] | None) -> dict[str, Any]:
    """A message's `mention_everyone`, `mentions` and `mention_roles`: whom it pings, from
    its `content`, its `allowed_mentions` (checked; None: absent) and, for a reply, the
    replied message's author (module docstring)."""
    parse = set(MENTION_KINDS) if allowed is None else set(allowed.get("parse") or ())
    users = set(allowed.get("users") or ()) if allowed else set()
    roles = set(allowed.get("roles") or ()) if allowed else set()
    named = dict.fromkeys(_USER_MENTION.findall(content))  # in order, once each
    mentions = [_mentioned_user(i) for i in named if "users" in parse or i in users]
    ping_reply = allowed is None or allowed.get("replied_user") is True
    pinged = {BOT_ID, *(user["id"] for user in mentions)}  # nobody twice, never itself
    if replied is not None and ping_reply and replied.get("id") not in pinged:
        mentions.append(copy_json(replied))
    return {
        "mention_everyone": "everyone" in parse and bool(_EVERYONE_MENTION.search(content)),
        "mentions": mentions,
        "mention_roles": [r for r in dict.fromkeys(_ROLE_MENTION.findall(content))
                          if "roles" in parse or r in roles],
    }  # fmt: skip


def _mentioned_user(user_id: str) -> dict[str, Any]:
    return {"id": user_id, "username": f"user{user_id}", "discriminator": "0",
            "global_name": None, "avatar": None}  # fmt: skip


def _json_body(raw: bytes) -> Any:
    """A request's JSON body (None for one that is not JSON)."""
    try:
        return json.loads(raw or b"{}")
    except ValueError:
        return None


def _invalid(
    body: Any, content: Any, components: Any, embeds: Any, files: bool = False
) -> Reply | None:
    """Discord's refusal of a create or an edit, or None: a body that is not a JSON
    object, or a message that would hold `content`, `components` (None: none), `embeds`
    and files (`files`: some) Discord does not take, or an `allowed_mentions` it does
    not take."""
    if not isinstance(body, dict):
        return _error(400, 50109, "The request body contains invalid JSON.")
    problem = None
    if not isinstance(content, str):
        problem = ("BASE_TYPE_STRING", "This field must be a string.")
    elif len(content) > MAX_CONTENT:
        problem = ("BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length.")
    elif not content.strip() and not embeds and not components and not files:
        problem = ("BASE_TYPE_REQUIRED", "This field is required")
    errors = None
    if problem is not None:
        errors = _form_error(["content"], *problem)
    elif components is not None:
        errors = _component_errors(components)
    if errors is None:
        errors = _mention_errors(body.get("allowed_mentions"))
    if errors is None:
        return None
    return Reply(400, {"message": "Invalid Form Body", "code": 50035, "errors": errors})


def _attachment_entries(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """payload_json's `attachments` entries by id (a file part `files[n]` has id n)."""
    entries = body.get("attachments")
    if not isinstance(entries, list):
        return {}
    return {str(e["id"]): e for e in entries if isinstance(e, dict) and "id" in e}


def _refused_files(fields: dict[str, Any], files: list[Part]) -> Reply | None:
    """Discord's refusal of a create for its files or its nonce, or None."""
    errors = None
    nonce = fields.get("nonce")
    if len(files) > MAX_FILES:
        errors = _form_error(["attachments"], "BASE_TYPE_MAX_LENGTH",
                             f"Must be {MAX_FILES} or fewer in length.")  # fmt: skip
    elif nonce is not None and (isinstance(nonce, bool) or not isinstance(nonce, (int, str))):
        errors = _form_error(["nonce"], "NONCE_TYPE_INVALID", "Nonce must be an integer or string.")
    elif nonce is not None and len(str(nonce)) > 25:
        errors = _form_error(["nonce"], "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
    if errors is None:
        return None
    return Reply(400, {"message": "Invalid Form Body", "code": 50035, "errors": errors})


def _timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())


class FakeDiscord(WebSocketFake):
    """Discord's REST API, Gateway and CDN, as the module's docstring tells."""

    name = "Discord"
    _ROUTES = routes(
        ("*", "/api/v10/interactions/{interaction_id}/{token}/callback", "_callback"),
        ("GET", "/api/v10/gateway/bot", "_gateway_bot"),
        ("GET", "/api/v10/users/@me", "_me"),
        ("POST", "/api/v10/channels/{channel}/{kind:messages|typing}", "_post"),
        ("PATCH", "/api/v10/channels/{channel}/messages/{message_id}", "_edit_message"),
    )
    _ascii_json = True
    _other_verbs = ("PATCH", "PUT", "DELETE")  # PATCH edits a message; the rest 404/405
    _socket_class = _Socket
    _socket_paths = frozenset({"/gateway", "/resume"})
    _CONTROLS = frozenset({
        "message", "dispatch", "press", "redeliver", "rate_limit", "fail", "clear_faults",
        "delete_message", "messages_in", "zombie", "unzombie", "close", "reconnect",
        "invalid_session", "drop", "flap", "unflap", "add_attachment",
    })  # fmt: skip
    _channel_field = "channel_id"
    _STATE = (
        "sent", "edits", "typing", "interactions", "callbacks", "refused", "rate_limited",
        "identifies", "resumes", "resume_attempts", "sessions", "connections", "open_sockets",
        "sockets", "heartbeats", "closes", "dispatches", "lost", "internal_errors", "uploads",
        "downloads",
    )  # fmt: skip

    def __init__(
        self,
        token: str = TOKEN,
        *,
        heartbeat_interval: float = 1.0,
        bucket_limit: int = 5,
        bucket_window: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        max_upload: int = MAX_UPLOAD,
    ) -> None:
        super().__init__()
        self.token = token
        self.heartbeat_interval = heartbeat_interval  # seconds (sent in ms)
        self.bucket_limit = bucket_limit
        self.bucket_window = bucket_window
        self.clock = clock  # what an interaction's 3 seconds (and a nonce's window) are on
        self.max_upload = max_upload  # bytes a create may carry (more: 413 code 40005)
        self._sessions: list[_Session] = []
        self._current: _Session | None = None
        self._flap: tuple[int, str] | None = None  # (code, at) for new sockets
        self._snowflakes = itertools.count(1)
        self._messages: dict[str, dict[str, Any]] = {}  # every message, by id, as it is now
        self._edits: list[dict[str, Any]] = []
        self._identifies: list[dict[str, Any]] = []
        self._resumes: list[dict[str, Any]] = []
        self._heartbeats: list[dict[str, Any]] = []
        self._closes: list[int | None] = []
        self._written: list[dict[str, Any]] = []  # dispatches that went out
        self._lost: list[dict[str, Any]] = []
        self._buckets: dict[str, list[float]] = {}  # bucket -> [reset_at, used]
        self._calls: list[dict[str, Any]] = []
        self._typing: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._channels: dict[str, tuple[str | None, int]] = {}  # id -> (guild, type)
        self._interactions: list[dict[str, Any]] = []  # every press, in order
        self._pressed: dict[str, dict[str, Any]] = {}  # interaction id -> its dispatch's d
        self._callbacks: list[dict[str, Any]] = []
        self._cdn_key = uuid.uuid4().bytes  # signs the CDN's links
        self._files: dict[str, _File] = {}  # attachment id -> the file the CDN serves
        self._downloads: list[str] = []  # attachment ids, a download each
        self._uploads: list[dict[str, Any]] = []
        self._nonces: dict[tuple[str, str], tuple[str, float]] = {}  # -> (message, at)

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """`{url}/api/v10`: append `/gateway/bot` and so on."""
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"ws://{host}:{port}/gateway"

    @property
    def resume_gateway_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"ws://{host}:{port}/resume"

    def shutdown(self) -> None:
        """Stop serving: every connection (HTTP and WebSocket) is shut at once, and
        nothing is waited for."""
        self._stop()

    # -- injecting events -----------------------------------------------------------------

    def message(
        self,
        content: str,
        *,
        channel_id: str | None = None,
        guild_id: str | None = None,
        author_id: str = "1001",
        author_name: str | None = None,
        author_bot: bool = False,
        mentions_bot: bool = False,
        reply_to_bot_message: str | None = None,
        reply_ping: bool = True,
        channel_type: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> str:
        """A MESSAGE_CREATE for the current session; returns the message's id.

        `channel_id` defaults to "2001" in a DM (no `guild_id`) and "3001" in a guild;
        `channel_type` to 1 (DM) or 0 (guild text; 11 for a public thread).
        `mentions_bot` puts `<@BOT_ID> ` before the content (unless it is there) and
        the bot in `mentions`. `reply_to_bot_message` (the id of a message the bot sent)
        makes it a reply (type 19, `message_reference`, `referenced_message`); with
        `reply_ping` the bot is in `mentions` too, as Discord does for a reply that
        pings. `attachments` (Attachment objects, as `add_attachment()` makes them) are
        the message's `attachments`; the content may then be empty."""
        channel = channel_id or ("2001" if guild_id is None else "3001")
        if channel_type is None:
            channel_type = 1 if guild_id is None else 0
        mention = f"<@{BOT_ID}>"
        if mentions_bot and mention not in content and f"<@!{BOT_ID}>" not in content:
            content = f"{mention} {content}"
        with self._cond:
            message_id = self._snowflake()
            author = {
                "id": author_id, "username": author_name or f"user{author_id}",
                "discriminator": "0", "global_name": None, "avatar": None,
            }  # fmt: skip
            if author_bot:
                author["bot"] = True
            mentioned = mention in content or f"<@!{BOT_ID}>" in content
            d: dict[str, Any] = {
                "id": message_id, "channel_id": channel, "channel_type": channel_type,
                "author": author, "content": content, "timestamp": _timestamp(),
                "edited_timestamp": None, "tts": False, "mention_everyone": False,
                "mentions": [], "mention_roles": [], "attachments": copy_json(attachments or []),
                "embeds": [], "pinned": False, "type": 0, "flags": 0,
            }  # fmt: skip
            if guild_id is not None:
                d["guild_id"] = guild_id
                d["member"] = {"roles": [], "joined_at": _timestamp(), "deaf": False, "mute": False}
            if reply_to_bot_message is not None:
                referenced = self._messages.get(reply_to_bot_message)
                if referenced is None:
                    raise LookupError(f"no message {reply_to_bot_message}")
                d["type"] = 19
                d["message_reference"] = {
                    "type": 0, "message_id": reply_to_bot_message,
                    "channel_id": referenced["channel_id"],
                }  # fmt: skip
                if guild_id is not None:
                    d["message_reference"]["guild_id"] = guild_id
                d["referenced_message"] = copy_json(referenced)
                mentioned = mentioned or (reply_ping and referenced["author"]["id"] == BOT_ID)
            if mentioned:
                d["mentions"] = [dict(BOT_USER)]
            self._messages[message_id] = d
            self._channels[channel] = (guild_id, channel_type)
            self._dispatch("MESSAGE_CREATE", d)
            return message_id

    def dispatch(self, t: str, d: dict[str, Any]) -> int | None:
        """Any other dispatch event for the current session; returns its `s` (None: no
        valid session, the event is lost)."""
        with self._cond:
            return self._dispatch(t, copy_json(d))

    def add_attachment(
        self,
        content: bytes | str,
        filename: str,
        content_type: str | None = None,
        *,
        size: int | None = None,
    ) -> dict[str, Any]:
        """A file a user attached, on the fake's CDN: returns its Attachment object, to
        pass to `message(attachments=[...])`. `content` is kept as is (bytes are never
        copied; a str, as a remote control sends it, is encoded in UTF-8); `size`
        (default: the content's length) may be larger: the CDN then serves the content
        followed by zeros up to `size`, which are never stored. `content_type` is guessed
        from the filename when None, as Discord does (text with `; charset=utf-8`). Its
        `url` (and `proxy_url`) is `{url}/attachments/0/<id>/<filename>?ex=&is=&hm=&`,
        signed as Discord's are."""
        data = content.encode() if isinstance(content, str) else content
        if not isinstance(data, bytes):
            data = bytes(data)
        if size is None:
            size = len(data)
        if size < len(data):
            raise ValueError(f"size {size} is less than the content's {len(data)} bytes")
        with self._cond:
            file = self._add_file("0", filename, content_type, data, size)
            self._cond.notify_all()
            return file.attachment()

    def press(
        self,
        message: str | dict[str, Any],
        button: str,
        *,
        user_id: str = "1001",
        user_name: str | None = None,
        guild_id: str | None = None,
    ) -> str:
        """`user_id` presses `button` (a custom_id, else a label) of a message the client
        sent (`message`: its id, or its record from `sent`): an INTERACTION_CREATE for
        the current session, and the interaction's 3 seconds start. The guild is
        `guild_id`, else the one `message()` last put in the message's channel, else
        none (a DM). Returns the interaction's id; LookupError for an unknown message or
        button."""
        message_id = str(message["id"] if isinstance(message, dict) else message)
        with self._cond:
            created = self._messages.get(message_id)
            if created is None or created["author"]["id"] != BOT_ID:
                raise LookupError(f"no message {message_id} from the bot")
            buttons = [c for row in created.get("components") or () for c in row["components"]]
            chosen = next((b for b in buttons if b.get("custom_id") == button), None)
            chosen = chosen or next((b for b in buttons if b.get("label") == button), None)
            if chosen is None or not chosen.get("custom_id"):
                raise LookupError(f"message {message_id} has no button {button!r}")
            channel = created["channel_id"]
            known_guild, channel_type = self._channels.get(channel, (None, None))
            guild = guild_id if guild_id is not None else known_guild
            if channel_type is None:
                channel_type = 1 if guild is None else 0
            user = {
                "id": user_id, "username": user_name or f"user{user_id}", "discriminator": "0",
                "global_name": None, "avatar": None,
            }  # fmt: skip
            interaction_id = self._snowflake()
            token = f"fake-interaction-{uuid.uuid4().hex}"
            d: dict[str, Any] = {
                "id": interaction_id, "application_id": APPLICATION_ID,
                "type": MESSAGE_COMPONENT,
                "data": {"custom_id": chosen["custom_id"], "component_type": 2},
                "channel_id": channel, "channel": {"id": channel, "type": channel_type},
                "token": token, "version": 1, "message": copy_json(created),
                "app_permissions": "2248473465835073", "locale": "en-US", "entitlements": [],
                "context": 1 if guild is None else 0,
            }  # fmt: skip
            if guild is None:
                d["user"] = user
            else:
                d["guild_id"] = guild
                d["guild"] = {"id": guild, "locale": "en-US", "features": []}
                d["guild_locale"] = "en-US"
                d["channel"]["guild_id"] = guild
                d["member"] = {
                    "user": user, "roles": [], "joined_at": _timestamp(), "deaf": False,
                    "mute": False, "flags": 0, "pending": False, "nick": None, "avatar": None,
                    "permissions": "2248473465835073",
                }  # fmt: skip
            self._pressed[interaction_id] = d
            self._interactions.append({
                "id": interaction_id, "token": token, "message_id": message_id,
                "channel_id": channel, "guild_id": guild, "custom_id": chosen["custom_id"],
                "user_id": user_id, "pressed_at": self.clock(), "at": time.monotonic(),
                "acknowledged": None, "s": [self._dispatch("INTERACTION_CREATE", copy_json(d))],
            })  # fmt: skip
            self._cond.notify_all()
            return interaction_id

    def redeliver(self, interaction_id: str) -> int | None:
        """Dispatch a press again, as it was (the same id and token), as a Resume from a
        sequence before it replays it; its 3 seconds do not start again. Returns the
        dispatch's `s` (None: no valid session, lost)."""
        with self._cond:
            d = self._pressed.get(str(interaction_id))
            if d is None:
                raise LookupError(f"no interaction {interaction_id}")
            record = next(r for r in self._interactions if r["id"] == str(interaction_id))
            s = self._dispatch("INTERACTION_CREATE", copy_json(d))
            record["s"].append(s)
            return s

    # -- faults ---------------------------------------------------------------------------

    def rate_limit(
        self,
        channel: str | None = None,
        retry_after: float = 1.0,
        global_: bool = False,
        times: int | None = 1,
        *,
        route: str = "messages",
    ) -> None:
        """The next `times` calls (route "messages", "edits", "typing" or "*"; to `channel`
        if given) answer 429 `{"message": "You are being rate limited.", "retry_after",
        "global"}` with `Retry-After` and, when global, `X-RateLimit-Global: true`."""
        fault = _Fault(429, 0, "You are being rate limited.", float(retry_after), bool(global_))
        with self._cond:
            self._faults.add(fault, route, channel, times)

    def fail(
        self,
        status: int,
        code: int,
        message: str,
        channel: str | None = None,
        times: int | None = 1,
        *,
        route: str = "messages",
    ) -> None:
        """The next `times` calls (route "messages", "edits", "typing", "callback" (an
        interaction's, for any channel) or "*"; to `channel` if given; None: all from now
        on) answer
        `status` `{"message", "code"}` (e.g. 403 50013 "Missing Permissions", 404 10003
        "Unknown Channel"). Faults queue: each call takes the first match."""
        with self._cond:
            self._faults.add(_Fault(int(status), int(code), message), route, channel, times)

    def delete_message(self, message_id: str) -> None:
        """A moderator deletes a message (the bot's or a user's): it is gone from its
        channel, and an edit of it answers 404 10008. LookupError for an unknown one."""
        with self._cond:
            if self._messages.pop(str(message_id), None) is None:
                raise LookupError(f"no message {message_id}")
            self._cond.notify_all()

    # -- Gateway trouble (on the current socket: the newest open one) ---------------------

    def zombie(self, socket: int | None = None) -> int:
        """The socket stops answering heartbeats and gets no more dispatches (they wait
        in the session for a Resume); client frames are still read. Returns its id."""
        with self._cond:
            sock = self._pick_socket(socket)
            sock.zombie = True
            self._cond.notify_all()
            return sock.id

    def unzombie(self) -> None:
        """Every socket answers heartbeats again; a socket still holding its session
        gets the dispatches it missed."""
        with self._cond:
            for sock in self._sockets:
                if sock.zombie and sock.closed_at is None:
                    sock.zombie = False
                    if sock.session is not None and sock.session.socket is sock:
                        self._flush(sock)
            self._cond.notify_all()

    def close(self, code: int = 4000, socket: int | None = None, reason: str = "") -> int:
        """Close the socket with a close frame of `code`. 4004, 4007, 4009 and
        4010-4014 invalidate its session. Returns the socket's id."""
        with self._cond:
            sock = self._pick_socket(socket)
            self._close_with(sock, int(code), reason)
            return sock.id

    def drop(self, socket: int | None = None) -> int:
        """Cut the socket's TCP connection (no close frame). Returns its id."""
        with self._cond:
            sock = self._pick_socket(socket)
            self._detach(sock, False)
            sock.close_now, sock.cut = True, True
            self._cond.notify_all()
            return sock.id

    def reconnect(self, socket: int | None = None) -> int:
        """Send `op 7` Reconnect; the socket stays open until the client closes it."""
        return self._send_op(socket, RECONNECT, None, invalidate=False)

    def invalid_session(self, resumable: bool = False, socket: int | None = None) -> int:
        """Send `op 9` with `d: resumable`; not resumable invalidates the session."""
        return self._send_op(socket, INVALID_SESSION, bool(resumable), invalidate=not resumable)

    def _send_op(self, socket: int | None, op: int, d: Any, *, invalidate: bool) -> int:
        """Send `op` on the socket, which takes no more dispatches; returns its id."""
        with self._cond:
            sock = self._pick_socket(socket)
            self._detach(sock, invalidate)
            sock.outbox.append((self._frame(op, d), None))
            self._cond.notify_all()
            return sock.id

    def flap(self, code: int = 4000, at: str = "identify") -> None:
        """From now on every new socket flaps: after Hello it closes with `code`, at once
        (`at="hello"`: the close frame follows Hello, before the client can Identify or
        Resume) or on the client's first Identify or Resume (`at="identify"`). No session
        begins on it; each Identify or Resume it gets is recorded (in `identify_payloads`
        and `resume_attempts`, with `flapped`), refused. Open sockets are not touched."""
        if at not in ("hello", "identify"):
            raise ValueError(f"flap at 'hello' or 'identify', not {at!r}")
        with self._cond:
            self._flap = (int(code), at)

    def unflap(self) -> None:
        """New sockets behave again."""
        self._change(_flap=None)

    # -- observing ----------------------------------------------------------------------

    sent = observed("_sent", """The messages created, in order: the request body's
        fields, `channel_id`, `id`, `at` (time.monotonic() of arrival).""")  # fmt: skip
    edits = observed("_edits", """The edits taken, in order: `channel_id`, `message_id`,
        `content`, `components` and `allowed_mentions` as the request gave them (None:
        left out), `at`
        (time.monotonic() of arrival). Refused ones are in `refused` (route "edits")
        only.""")  # fmt: skip
    rate_limited = observed("_calls", "How many REST calls the fake answered 429, any route.",
                            lambda calls: sum(1 for c in calls if c["status"] == 429))  # fmt: skip
    typing = observed("_typing", "Typing triggers taken: `channel_id`, `at`.")
    interactions = observed("_interactions", """Every press, in order: `id`, `token`,
        `message_id`, `channel_id`, `guild_id`, `custom_id`, `user_id`, `pressed_at` (on
        `clock`), `at`, `acknowledged` (the type of the callback taken, or None), `s`
        (the sequence of each dispatch of it).""")  # fmt: skip
    callbacks = observed("_callbacks", """Every interaction callback, in order:
        `interaction_id`, `type`, `data`, `status`, `code` (of an error), `in_time`
        (within 3 s of the press on `clock`; None for an unknown interaction), `after`
        (seconds since the press), `authorization` (whether it carried that header),
        `at`.""")  # fmt: skip
    refused = observed("_refused", """REST calls answered with an error: `route`,
        `channel_id`, `message_id` (an edit's; else None), `status`, `code`, `message`,
        `retry_after`, `global`, `body`, `at`.""")  # fmt: skip
    calls = observed("_calls", "Every REST call: `verb`, `path`, `status`, `at`.")
    identify_payloads = observed("_identifies", """The `d` of every Identify (the token
        included), with `socket` and `at`.""")  # fmt: skip
    resume_attempts = observed("_resumes", """Every Resume: `session_id`, `seq`,
        `accepted`, `replayed` (count), `socket`, `at`.""")  # fmt: skip
    heartbeats = observed("_heartbeats", """Every heartbeat: `socket`, `d` (the client's
        last sequence), `acked`, `at`.""")  # fmt: skip
    closes = observed("_closes", """The codes of the close frames clients sent, in order
        (None: no code).""")  # fmt: skip
    dispatches = observed("_written", """Dispatches written on a socket: `session_id`, `s`,
        `t`, `id` (a message's or an interaction's), `socket`, `replay` (sent again on
        Resume), `at`.""")  # fmt: skip
    lost = observed("_lost", "Events injected while no valid session existed: `t`, `d`, `at`.")
    uploads = observed("_uploads", """Every file the bot uploaded with a message created,
        in order: `channel_id`, `message_id`, `attachment_id`, `filename`, `description`
        (from payload_json's `attachments`, else None), `size`, `sha256` (hex),
        `content_type` (the part's, else guessed from the filename), `text` (the message's
        content), `message_reference` (as given, else None), `at` (time.monotonic() of
        arrival), `content` (the bytes when at most 1 MiB, else None). A create answered
        with the message an enforced nonce found uploads nothing.""")  # fmt: skip
    downloads = observed("_downloads", """The ids of the attachments the CDN served, one
        per download, in order (links refused are not counted).""")  # fmt: skip

    identifies = observed("_identifies", """Identify frames taken (refused ones on a
        flapping socket too).""", len)  # fmt: skip
    resumes = observed("_resumes", "Resumes accepted (answered with a replay and RESUMED).",
                       lambda resumes: sum(1 for r in resumes if r["accepted"]))  # fmt: skip
    sessions = observed("_sessions", """Every session, in order: `session_id`, `seq`,
        `valid`, `socket`, `resumes`.""", infos)  # fmt: skip
    connections = observed("_sockets", "Gateway handshakes completed in the fake's life.", len)

    # `sent_to(channel)`, `wait_sent(count, timeout, channel=)`: the kit's; `sockets`,
    # `open_sockets`, `wait_connections` and `wait_open_sockets`: the WebSocket kit's.

    def messages_in(self, channel_id: str) -> list[dict[str, Any]]:
        """The bot's messages in a channel as a user sees them now, oldest first: after
        every edit, without the deleted ones (Discord's Message objects)."""
        with self._cond:
            channel = str(channel_id)
            mine = [m for m in self._messages.values()
                    if m["channel_id"] == channel and m["author"]["id"] == BOT_ID]  # fmt: skip
            return copy_json(sorted(mine, key=lambda m: int(m["id"])))

    def wait_edits(
        self, count: int = 1, timeout: float = 10.0, *, message_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The edits taken (of `message_id` if given), once at least `count` were."""
        what = f"{count} edit(s)" + ("" if message_id is None else f" of message {message_id}")
        return self._wait_records("_edits", count, timeout, what,
                                  lambda e: message_id in (None, e["message_id"]))  # fmt: skip

    def wait_uploads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_uploads", count, timeout, f"{count} file(s) uploaded")

    def wait_downloads(self, count: int = 1, timeout: float = 10.0) -> list[str]:
        return self._wait_records("_downloads", count, timeout, f"{count} download(s)")

    def wait_typing(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_typing", count, timeout, f"{count} typing trigger(s)")

    def wait_callbacks(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_callbacks", count, timeout, f"{count} interaction callback(s)")

    def wait_refused(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_refused", count, timeout, f"{count} refused call(s)")

    def wait_identifies(self, count: int = 1, timeout: float = 10.0) -> None:
        self._wait_records("_identifies", count, timeout, f"{count} Identify(s)")

    def wait_resumes(self, count: int = 1, timeout: float = 10.0) -> None:
        self._wait_records("_resumes", count, timeout, f"{count} accepted Resume(s)",
                           lambda r: r["accepted"])  # fmt: skip

    def wait_heartbeats(self, count: int = 1, timeout: float = 10.0) -> None:
        self._wait_records("_heartbeats", count, timeout, f"{count} heartbeat(s)")

    def wait_settled(self, timeout: float = 10.0) -> int:
        """Until a client settled on the newest session: two of its heartbeats came on
        the session's socket after the Identify or Resume that put the session there
        (their ACKs follow READY or RESUMED, and a client sends the second only once it
        read the first one's ACK, or it would have closed the socket as a zombie).
        Returns that socket's id."""

        def settled() -> bool:
            session = self._sessions[-1] if self._sessions else None
            sock = None if session is None else session.socket
            if sock is None:
                return False
            took = [r["at"] for r in [*self._identifies, *self._resumes] if r["socket"] == sock.id]
            beats = [h for h in self._heartbeats if h["socket"] == sock.id and h["at"] > max(took)]
            return len(beats) >= 2

        self._wait(settled, timeout, "client settled on its session")
        with self._cond:
            session = self._sessions[-1]
            assert session.socket is not None
            return session.socket.id

    def wait_closes(self, count: int = 1, timeout: float = 10.0) -> list[int | None]:
        return self._wait_records("_closes", count, timeout, f"{count} client close(s)")

    # -- internals (called holding the lock) ------------------------------------------------

    def _snowflake(self) -> str:
        ms = int(time.time() * 1000) - _EPOCH_MS
        return str((ms << 22) | (next(self._snowflakes) & 0x3FFFFF))

    def _add_file(
        self, channel: str, filename: str, content_type: str | None, content: bytes, size: int
    ) -> _File:
        """A file on the CDN, under a signed link good for LINK_LIFETIME."""
        file_id = self._snowflake()
        issued = int(time.time())
        ex, is_ = f"{issued + LINK_LIFETIME:x}", f"{issued:x}"
        query = f"ex={ex}&is={is_}&hm={self._signature(file_id, ex, is_)}&"
        url = f"{self.url}/attachments/{channel}/{file_id}/{quote(filename, safe='')}?{query}"
        content_type = content_type or _guess_type(filename)
        file = _File(file_id, channel, filename, content_type, content, size, url)
        self._files[file_id] = file
        return file

    def _signature(self, file_id: str, ex: str, is_: str) -> str:
        text = f"{file_id}?ex={ex}&is={is_}".encode()
        return hmac.new(self._cdn_key, text, hashlib.sha256).hexdigest()

    def _frame(self, op: int, d: Any, s: int | None = None, t: str | None = None) -> str:
        return json.dumps({"op": op, "d": d, "s": s, "t": t}, ensure_ascii=False)

    def _dispatch(self, t: str, d: dict[str, Any]) -> int | None:
        session = self._current
        if session is None or not session.valid:
            self._lost.append({"t": t, "d": copy_json(d), "at": time.monotonic()})
            self._cond.notify_all()
            return None
        return self._add_dispatch(session, t, d)

    def _add_dispatch(self, session: _Session, t: str, d: Any) -> int:
        session.seq += 1
        session.dispatches.append({"op": DISPATCH, "d": d, "s": session.seq, "t": t})
        sock = session.socket
        if sock is not None and not sock.zombie and not sock.detached:
            self._flush(sock)
        self._cond.notify_all()
        return session.seq

    def _flush(self, sock: _Socket, *, replay: bool = False) -> None:
        """Put the session's dispatches the socket has not had in its outbox."""
        session = sock.session
        assert session is not None
        for frame in session.dispatches:
            if frame["s"] <= sock.sent_seq:
                continue
            sock.sent_seq = frame["s"]
            if replay and frame["t"] in ("READY", "RESUMED"):
                continue
            d = frame["d"]
            is_message = isinstance(d, dict) and (
                frame["t"].startswith("MESSAGE") or frame["t"] == "INTERACTION_CREATE"
            )
            record = {
                "session_id": session.id, "s": frame["s"], "t": frame["t"],
                "id": d.get("id") if is_message else None,
                "socket": sock.id, "replay": replay, "at": None, "written": False,
            }  # fmt: skip
            sock.outbox.append((json.dumps(frame, ensure_ascii=False), record))

    def _detach(self, sock: _Socket, invalidate: bool) -> None:
        """The socket takes no more dispatches (they wait for a Resume)."""
        sock.detached = True
        session = sock.session
        if session is not None:
            if session.socket is sock:
                session.socket = None
            if invalidate:
                session.valid = False

    def _pick_socket(self, socket_id: int | None) -> _Socket:
        open_ = [s for s in self._sockets if s.closed_at is None and not s.close_now]
        if socket_id is not None:
            for sock in open_:
                if sock.id == socket_id:
                    return sock
            raise LookupError(f"no open socket {socket_id}")
        if not open_:
            raise LookupError("no open socket")
        return open_[-1]

    # -- the Gateway: the WebSocket kit's loop, with Discord's sessions ----------------------

    def _ws_refusal(self, status: int, why: str) -> Reply:
        return _error(status, 0, why)

    def _ws_opened(self, sock: _Socket) -> None:
        hello = {"heartbeat_interval": int(self.heartbeat_interval * 1000)}
        sock.outbox.append((self._frame(HELLO, hello), None))
        if self._flap is not None:
            sock.flap_code = self._flap[0]
            if self._flap[1] == "hello":
                self._close_with(sock, sock.flap_code, "flapping")

    def _ws_ended(self, sock: _Socket) -> None:
        self._detach(sock, False)

    def _ws_written(self, sock: _Socket, record: dict[str, Any]) -> None:
        record["at"] = time.monotonic()
        self._written.append(record)

    def _on_binary(self, sock: _Socket) -> None:
        self._close_with(sock, 4002, "binary frames are not decoded")

    def _on_client_close(self, sock: _Socket, code: int | None, first: bool) -> None:
        ends = False
        if first and code != 1006:
            sock.client_close_code = code
            self._closes.append(code)
            session = sock.session  # not moved on to a newer socket since
            ends = code in ENDING_CODES and session is not None and session.last is sock
        self._detach(sock, ends)

    def _close_with(self, sock: _Socket, code: int, reason: str) -> None:
        with self._cond:
            self._detach(sock, code in INVALIDATING_CODES)
            sock.close_now, sock.close_code, sock.fake_close_code = True, code, code
            self._cond.notify_all()

    def _on_frame(self, sock: _Socket, frame: Any, now: float) -> None:
        if sock.close_now and sock.flap_code is None:
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("op"), int):
            self._close_with(sock, 4002, "decode error")
            return
        op, d = frame["op"], frame.get("d")
        if sock.flap_code is not None and op in (IDENTIFY, RESUME):
            self._flapped(sock, op, d if isinstance(d, dict) else {}, now)
        elif sock.close_now:
            return
        elif op == HEARTBEAT:
            sock.heartbeats += 1
            self._heartbeats.append(
                {"socket": sock.id, "d": d, "acked": not sock.zombie, "at": now}
            )
            if not sock.zombie:
                sock.outbox.append((self._frame(HEARTBEAT_ACK, None), None))
        elif op == IDENTIFY:
            self._identify(sock, d if isinstance(d, dict) else {}, now)
        elif op == RESUME:
            self._resume(sock, d if isinstance(d, dict) else {}, now)
        elif op not in _CLIENT_OPS:
            self._close_with(sock, 4001, "unknown opcode")
        elif not sock.authenticated:
            self._close_with(sock, 4003, "not authenticated")

    def _flapped(self, sock: _Socket, op: int, d: dict[str, Any], now: float) -> None:
        """A flapping socket records an Identify or Resume, refuses it and closes."""
        if op == IDENTIFY:
            self._identifies.append({**copy_json(d), "socket": sock.id, "at": now, "flapped": True})
        else:
            self._resumes.append({
                "session_id": d.get("session_id"), "seq": d.get("seq"), "accepted": False,
                "replayed": 0, "socket": sock.id, "at": now, "flapped": True,
            })  # fmt: skip
        if not sock.close_now:
            assert sock.flap_code is not None
            self._close_with(sock, sock.flap_code, "flapping")

    def _identify(self, sock: _Socket, d: dict[str, Any], now: float) -> None:
        self._identifies.append({**copy_json(d), "socket": sock.id, "at": now})
        if sock.authenticated:
            self._close_with(sock, 4005, "already authenticated")
            return
        if d.get("token") != self.token:
            self._close_with(sock, 4004, "authentication failed")
            return
        session = _Session(uuid.uuid4().hex, now)
        self._sessions.append(session)
        self._current = session
        sock.session, sock.authenticated, sock.sent_seq = session, True, 0
        session.socket = session.last = sock
        ready = {
            "v": 10, "user": dict(BOT_USER), "guilds": [], "session_id": session.id,
            "resume_gateway_url": self.resume_gateway_url, "shard": [0, 1],
            "application": {"id": APPLICATION_ID, "flags": 0},
        }  # fmt: skip
        self._add_dispatch(session, "READY", ready)

    def _resume(self, sock: _Socket, d: dict[str, Any], now: float) -> None:
        session_id, seq = d.get("session_id"), d.get("seq")
        record = {
            "session_id": session_id, "seq": seq, "accepted": False, "replayed": 0,
            "socket": sock.id, "at": now,
        }  # fmt: skip
        self._resumes.append(record)
        if d.get("token") != self.token:
            self._close_with(sock, 4004, "authentication failed")
            return
        if sock.authenticated:
            self._close_with(sock, 4005, "already authenticated")
            return
        session = next((s for s in self._sessions if s.id == session_id), None)
        if session is None or not session.valid:
            sock.outbox.append((self._frame(INVALID_SESSION, False), None))
            return
        if seq is None:
            seq = 0
        if not isinstance(seq, int) or seq < 0 or seq > session.seq:
            session.valid = False
            self._close_with(sock, 4009, "invalid seq")
            return
        old = session.socket
        if old is not None and old is not sock:
            old.detached = True  # it takes nothing more
        session.socket, session.last, session.resumes = sock, sock, session.resumes + 1
        sock.session, sock.authenticated, sock.sent_seq = session, True, seq
        before = len(sock.outbox)
        self._flush(sock, replay=True)
        record["replayed"] = len(sock.outbox) - before
        record["accepted"] = True
        self._add_dispatch(session, "RESUMED", {"_trace": ["fake-discord"]})

    # -- REST -----------------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return _error(500, 0, "fake internal error")

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        """The API's answer, recorded in `calls` (the CDN's is not: it is not the API)."""
        verb, path = request.command, urlsplit(request.path).path
        if verb == "GET" and path.startswith("/attachments/"):
            return self._cdn(path, urlsplit(request.path).query)
        now = time.monotonic()
        found = match(self._ROUTES, verb, API_PREFIX + path[len(API_PREFIX) :].strip("/"))
        auth = str(request.headers.get("authorization", ""))
        if not path.startswith(API_PREFIX):
            reply = _error(404, 0, "404: Not Found")
        elif isinstance(found, tuple) and found[0] == "_callback":
            reply = _error(405, 0, "405: Method Not Allowed")
            if verb == "POST":
                reply = self._callback(raw, bool(auth), now, **found[1])
        elif auth != f"Bot {self.token}":
            reply = self._refuse("auth", None, _error(401, 0, "401: Unauthorized"), None, now)
        elif isinstance(found, int):
            reply = _error(
                found, 0, "404: Not Found" if found == 404 else "405: Method Not Allowed"
            )
        else:
            reply = getattr(self, found[0])(request, raw, now, **found[1])
        with self._cond:
            self._calls.append({"verb": verb, "path": path, "status": reply.status, "at": now})
            self._cond.notify_all()
        return reply

    def _gateway_bot(self, request: TrackedHandler, raw: bytes, now: float) -> Reply:
        body = {
            "url": self.gateway_url, "shards": 1,
            "session_start_limit": {
                "total": 1000, "remaining": 999, "reset_after": 14_400_000,
                "max_concurrency": 1,
            },
        }  # fmt: skip
        return self._with_bucket(Reply(200, body), "gateway-bot", now)

    def _me(self, request: TrackedHandler, raw: bytes, now: float) -> Reply:
        return self._with_bucket(Reply(200, dict(BOT_USER)), "users-me", now)

    def _post(
        self, request: TrackedHandler, raw: bytes, now: float, channel: str, kind: str
    ) -> Reply:
        """`POST channels/{channel}/messages` or `.../typing`."""
        bucket = f"{'msg' if kind == 'messages' else 'typing'}-{channel}"
        with self._cond:
            fault = self._faults.take(kind, channel)
        if fault is not None:
            return self._refuse(kind, channel, self._fault_reply(fault, bucket, now), None, now)
        if kind == "typing":
            with self._cond:
                self._typing.append({"channel_id": channel, "at": now})
                self._cond.notify_all()
            return self._with_bucket(Reply(204, None), bucket, now)
        content_type = str(request.headers.get("content-type", ""))
        return self._create_message(channel, raw, content_type, bucket, now)

    def _cdn(self, path: str, query: str) -> Reply:
        """`GET /attachments/<channel>/<id>/<filename>?ex=&is=&hm=`: the file, with no
        Authorization, if the link is the one the fake made and not expired; else 404
        "This content is no longer available.", as Discord's CDN answers."""
        segments = [unquote(s) for s in path.split("/")]
        fields = parse_qs(query)
        ex, is_, hm = (fields.get(key, [""])[0] for key in ("ex", "is", "hm"))
        with self._cond:
            file = self._files.get(segments[3]) if len(segments) == 5 else None
            good = (
                file is not None
                and segments[2:] == [file.channel, file.id, file.filename]
                and hmac.compare_digest(hm.encode(), self._signature(file.id, ex, is_).encode())
                and int(ex, 16) > time.time()  # hm is good: ex is the fake's own hex
            )
            if not good or file is None:
                return Reply(404, GONE.encode(), content_type="text/plain; charset=utf-8")
            self._downloads.append(file.id)
            self._cond.notify_all()
        return Reply(200, Blob(file.content, file.size), content_type=file.content_type)

    def _create_message(
        self, channel: str, raw: bytes, content_type: str, bucket: str, now: float
    ) -> Reply:
        """`POST channels/{channel}/messages`, JSON or multipart (module docstring)."""
        if len(raw) > self.max_upload:
            reply = self._with_bucket(_error(413, 40005, "Request entity too large"), bucket, now)
            return self._refuse("messages", channel, reply, None, now)
        files: list[Part] = []
        if content_type.split(";")[0].strip().lower() == "multipart/form-data":
            try:
                body, files = _form(content_type, raw)
            except ValueError:
                reply = self._with_bucket(_error(400, 50035, "Invalid Form Body"), bucket, now)
                return self._refuse("messages", channel, reply, None, now)
        else:
            body = _json_body(raw)
        fields = body if isinstance(body, dict) else {}
        content = "" if fields.get("content") is None else fields["content"]
        reply = _invalid(
            body, content, fields.get("components"), fields.get("embeds"), bool(files)
        ) or _refused_files(fields, files)
        if reply is not None:
            return self._refuse(
                "messages", channel, self._with_bucket(reply, bucket, now), body, now
            )
        digests = [hashlib.sha256(f.data).hexdigest() for f in files]
        nonce = fields.get("nonce")
        with self._cond:
            key = None if nonce is None else (channel, str(nonce))
            earlier = None if key is None else self._nonces.get(key)
            if (
                earlier is not None and fields.get("enforce_nonce") in (True, "true")
                and self.clock() - earlier[1] <= NONCE_WINDOW and earlier[0] in self._messages
            ):  # fmt: skip
                found = copy_json(self._messages[earlier[0]])  # the message as it is now
                return self._with_bucket(Reply(200, found), bucket, now)
            message_id = self._snowflake()
            message: dict[str, Any] = {
                "id": message_id, "channel_id": channel, "type": 0, "content": content,
                "author": dict(BOT_USER), "timestamp": _timestamp(), "edited_timestamp": None,
                "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
                "attachments": [], "embeds": copy_json(body.get("embeds") or []),
                "pinned": False, "flags": 0, "components": copy_json(body.get("components") or []),
            }  # fmt: skip
            if key is not None:
                message["nonce"] = nonce
                self._nonces[key] = (message_id, self.clock())
            reference = body.get("message_reference")
            if isinstance(reference, dict) and reference.get("message_id"):
                message["type"] = 19
                message["message_reference"] = {
                    "type": 0, "message_id": str(reference["message_id"]),
                    "channel_id": str(reference.get("channel_id") or channel),
                }  # fmt: skip
                referenced = self._messages.get(str(reference["message_id"]))
                message["referenced_message"] = copy_json(referenced)
            replied = (message.get("referenced_message") or {}).get("author")
            message.update(_mentions(content, fields.get("allowed_mentions"), replied))
            entries = _attachment_entries(body)
            for part, digest in zip(files, digests, strict=True):
                match = _FILE_PART.fullmatch(part.name or "")
                entry = entries.get(match.group(1), {}) if match else {}
                filename = str(entry.get("filename") or part.filename)
                file = self._add_file(channel, filename, part.content_type, part.data,
                                      len(part.data))  # fmt: skip
                attachment = file.attachment()
                if entry.get("description") is not None:
                    attachment["description"] = entry["description"]
                message["attachments"].append(attachment)
                self._uploads.append({
                    "channel_id": channel, "message_id": message_id, "attachment_id": file.id,
                    "filename": filename, "description": entry.get("description"),
                    "size": file.size, "sha256": digest, "content_type": file.content_type,
                    "text": content, "message_reference": copy_json(reference), "at": now,
                    "content": part.data if file.size <= KEPT_CONTENT else None,
                })  # fmt: skip
            self._messages[message_id] = message
            sent = {**copy_json(body), "channel_id": channel, "id": message_id, "at": now}
            self._sent.append(sent)
            self._cond.notify_all()
        return self._with_bucket(Reply(200, copy_json(message)), bucket, now)

    def _edit_message(
        self, request: TrackedHandler, raw: bytes, now: float, channel: str, message_id: str
    ) -> Reply:
        """`PATCH channels/{channel}/messages/{message_id}` (module docstring)."""
        bucket = f"edit-{channel}"
        with self._cond:
            fault = self._faults.take("edits", channel)
        if fault is not None:
            reply = self._fault_reply(fault, bucket, now)
            return self._refuse("edits", channel, reply, None, now, message_id)
        body = _json_body(raw)
        with self._cond:
            message = self._messages.get(message_id)
            if message is None or message["channel_id"] != channel:
                reply = _error(404, 10008, "Unknown Message")
            elif message["author"]["id"] != BOT_ID:
                reply = _error(403, 50005, "Cannot edit a message authored by another user")
            else:
                reply = self._edit(message, body, now)
            self._cond.notify_all()
        reply = self._with_bucket(reply, bucket, now)
        if reply.status != 200:
            return self._refuse("edits", channel, reply, body, now, message_id)
        return reply

    def _edit(self, message: dict[str, Any], body: Any, now: float) -> Reply:
        """The bot's `message` takes the fields `body` gives (holding the lock), unless the
        message it would become is refused; the edit is recorded in `edits`."""
        fields = body if isinstance(body, dict) else {}
        shown = {key: message[key] for key in ("content", "components", "embeds")}
        after = {**shown, **{key: fields[key] for key in shown if key in fields}}
        after["content"] = "" if after["content"] is None else after["content"]
        after["components"] = after["components"] or []
        after["embeds"] = after["embeds"] or []
        refusal = _invalid(body, after["content"], after["components"], after["embeds"],
                           bool(message.get("attachments")))  # fmt: skip
        if refusal is not None:
            return refusal
        message.update(copy_json(after), edited_timestamp=_timestamp())
        if "content" in fields or "allowed_mentions" in fields:
            replied = (message.get("referenced_message") or {}).get("author")
            message.update(_mentions(after["content"], fields.get("allowed_mentions"), replied))
        self._edits.append({
            "channel_id": message["channel_id"], "message_id": message["id"],
            "content": copy_json(fields.get("content")),
            "components": copy_json(fields.get("components")),
            "allowed_mentions": copy_json(fields.get("allowed_mentions")), "at": now,
        })  # fmt: skip
        return Reply(200, copy_json(message))

    def _callback(
        self, raw: bytes, authorization: bool, now: float, interaction_id: str, token: str
    ) -> Reply:
        """An interaction's callback (module docstring), recorded in `callbacks`."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        with self._cond:
            pressed = next((r for r in self._interactions if r["id"] == interaction_id), None)
            if pressed is not None and pressed["token"] != token:
                pressed = None
            after = None if pressed is None else self.clock() - pressed["pressed_at"]
            fault = self._faults.take("callback", None)
            if fault is not None:
                reply = self._fault_reply(fault, f"callback-{interaction_id}", now)
            elif pressed is None or after is None or after > ACK_WITHIN:
                reply = _error(404, 10062, "Unknown interaction")
            elif pressed["acknowledged"] is not None:
                reply = _error(400, 40060, "Interaction has already been acknowledged.")
            elif body.get("type") not in COMPONENT_CALLBACKS:
                reply = _error(400, 50035, "Invalid Form Body")
            else:
                pressed["acknowledged"] = body["type"]
                reply = Reply(204, None)
            self._callbacks.append({
                "interaction_id": interaction_id, "type": body.get("type"),
                "data": copy_json(body.get("data")), "status": reply.status,
                "code": (reply.body or {}).get("code"),
                "in_time": None if after is None else after <= ACK_WITHIN, "after": after,
                "authorization": authorization, "at": now,
            })  # fmt: skip
            self._cond.notify_all()
        return reply

    def _fault_reply(self, fault: _Fault, bucket: str, now: float) -> Reply:
        if fault.status != 429:
            return self._with_bucket(_error(fault.status, fault.code, fault.message), bucket, now)
        retry_after = float(fault.retry_after or 0.0)
        body = {"message": fault.message, "retry_after": retry_after, "global": fault.global_}
        if not fault.global_:
            body["code"] = 0
        headers = [("Retry-After", str(max(0, math.ceil(retry_after))))]
        if fault.global_:
            headers += [("X-RateLimit-Global", "true"), ("X-RateLimit-Scope", "global")]
            return Reply(429, body, headers)
        headers.append(("X-RateLimit-Scope", "user"))
        reply = Reply(429, body, headers)
        reply.headers += self._bucket_headers(bucket, now, exhausted_for=retry_after)
        return reply

    def _with_bucket(self, reply: Reply, bucket: str, now: float) -> Reply:
        reply.headers += self._bucket_headers(bucket, now)
        return reply

    def _bucket_headers(
        self, bucket: str, now: float, exhausted_for: float | None = None
    ) -> list[tuple[str, str]]:
        with self._cond:
            state = self._buckets.get(bucket)
            if state is None or state[0] <= now:
                state = self._buckets[bucket] = [now + self.bucket_window, 0.0]
            if exhausted_for is not None:
                state[0], state[1] = now + exhausted_for, float(self.bucket_limit)
            else:
                state[1] = min(float(self.bucket_limit), state[1] + 1)
            reset_after = max(0.0, state[0] - now)
            remaining = int(self.bucket_limit - state[1])
        return [
            ("X-RateLimit-Limit", str(self.bucket_limit)),
            ("X-RateLimit-Remaining", str(remaining)),
            ("X-RateLimit-Reset", f"{time.time() + reset_after:.3f}"),
            ("X-RateLimit-Reset-After", f"{reset_after:.3f}"),
            ("X-RateLimit-Bucket", bucket),
        ]

    def _refuse(
        self,
        route: str,
        channel: str | None,
        reply: Reply,
        body: Any,
        now: float,
        message_id: str | None = None,
    ) -> Reply:
        data = reply.body or {}
        with self._cond:
            self._refused.append({
                "route": route, "channel_id": channel, "message_id": message_id,
                "status": reply.status,
                "code": data.get("code"), "message": data.get("message"),
                "retry_after": data.get("retry_after"), "global": data.get("global"),
                "body": copy_json(body), "at": now,
            })  # fmt: skip
            self._cond.notify_all()
        return reply


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.discord",
        description="A fake Discord (REST and Gateway): prints its base URL, serves until killed.",
    )
    parser.add_argument("--token", default=TOKEN, help="the bot token it accepts")
    parser.add_argument(
        "--heartbeat-interval", type=float, default=41.25, help="seconds, sent in Hello"
    )
    parser.add_argument(
        "--max-upload", type=int, default=MAX_UPLOAD, help="bytes a message create may carry"
    )
    args = parser.parse_args()
    fake = FakeDiscord(
        args.token, heartbeat_interval=args.heartbeat_interval, max_upload=args.max_upload
    )
    serve_until_killed(fake)


if __name__ == "__main__":
    main()
