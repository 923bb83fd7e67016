"""A fake Telegram Bot API on 127.0.0.1: a real HTTP server speaking the Bot API's
JSON protocol (long polling with getUpdates, sendMessage with inline keyboards,
button presses and answerCallbackQuery, sendChatAction, getFile and file downloads,
files sent with sendDocument, sendPhoto and sendVoice), for the tests of the Telegram
adapter and the benches.

Calls go to `{url}/bot<token>/<method>` (method names are case-insensitive, as on
Telegram), GET with a query string or POST with a JSON, urlencoded or multipart
body (a form's nested values, such as `reply_parameters`, as JSON text). Files
are served at `{url}/file/bot<token>/<file_path>`. Every answer is
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": N, "description":
"...", "parameters": {"retry_after": N | "migrate_to_chat_id": ID}}`, with the
HTTP status equal to `error_code`. A wrong token, or any token once
`revoke_token()` was called, answers 401 "Unauthorized".

    getMe            -> {"id": BOT_ID, "is_bot": true, "username": "hermes_test_bot", ...}
    deleteWebhook    (drop_pending_updates) -> true; recorded; dropping really drops
    getUpdates       (offset, limit, timeout, allowed_updates) -> [Update, ...]
    sendMessage      (chat_id, text, message_thread_id, reply_parameters, parse_mode,
                     reply_markup) -> Message; validated as Telegram does (below)
    editMessageText  (chat_id, message_id, text, parse_mode, reply_markup) -> Message;
                     the bot's own message only (below)
    answerCallbackQuery (callback_query_id, text, show_alert) -> true; recorded in
                     `answered`; an id never given by `press()`, or answered already:
                     400 "Bad Request: query is too old and response timeout expired
                     or query ID is invalid"
    sendDocument, sendPhoto, sendVoice (chat_id, document | photo | voice, caption,
                     parse_mode, message_thread_id, reply_parameters, reply_markup,
                     duration) -> Message with its `document` | `photo` | `voice`;
                     validated as Telegram does (below)
    sendChatAction   (chat_id, action, message_thread_id) -> true; recorded
    getFile          (file_id) -> {"file_id", "file_unique_id", "file_size", "file_path"}
    setWebhook, getWebhookInfo, setMyCommands, deleteMyCommands: minimal answers

getUpdates: a call with offset N confirms (forgets) every update whose update_id
is below N (`acked` is the highest confirmed id), then answers at once with the
updates from N on (up to `limit`, default 100), else holds until one arrives or
`timeout` seconds pass (then `[]`). One poller at a time: a getUpdates that
arrives while another is held answers 409 "Conflict: terminated by other
getUpdates request; ..." at once (counted in `conflicts`; it confirms nothing).
A held poll whose client has gone (the connection closed: a cancelled request)
no longer counts as held, so a client that cancels its poll before starting the
next is not in conflict with itself. `max_concurrent_polls` is the most polls
ever open at once (the one arriving included). While a webhook is set
(`set_webhook()` or the setWebhook call), getUpdates answers 409 too.

sendMessage checks, in Telegram's order: an injected fault; a migrated group
(400 "Bad Request: group chat was upgraded to a supergroup chat" with
`parameters.migrate_to_chat_id`); the parse mode ("MarkdownV2", "Markdown" or
"HTML": a text that does not parse answers 400 "Bad Request: can't parse
entities: ..."); an empty text after parsing (400 "Bad Request: message text is
empty"); more than 4096 UTF-16 code units after parsing (400 "Bad Request:
message is too long"); then its `reply_markup`: an `inline_keyboard` must be an
array of arrays of buttons, each with a string `text` and an action (`callback_data`
or `url`: else 400 "Bad Request: can't parse inline keyboard button: Text buttons are
unallowed in the inline keyboard"), `callback_data` 1-64 bytes (else 400 "Bad
Request: BUTTON_DATA_INVALID"). A message taken keeps its inline keyboard (its
`reply_markup`, as Telegram returns it). A send taken is recorded in `sent` (its
parameters, `reply_markup` included, `method` "sendMessage", the chat id it landed in
as an int where it is one, its `message_id` and arrival time `at`,
time.monotonic()); one refused, in `refused` (the same plus `error_code` and
`description`). Message ids are global and increasing, shared with the injected
messages.

sendDocument, sendPhoto and sendVoice take the file as a multipart part named
`document`, `photo` or `voice` (with a filename: an upload; its content type as
given), or as a string: the file_id of a file the fake has (`add_file()`, an earlier
upload: sent again), or "attach://<name>" naming another part. Their checks, in
Telegram's order: an injected fault (`fail("sendDocument", 429, retry_after=5)`);
a migrated group, as sendMessage; flood control when on; no file (400 "Bad Request:
there is no document in the request", photo and voice likewise); a file_id the fake
does not know (400 "Bad Request: wrong file identifier/HTTP URL specified"); an upload
over `max_upload` bytes (default 50 MB, Telegram's limit for bots: HTTP 413 `{"ok":
false, "error_code": 413, "description": "Request Entity Too Large"}`); a photo over
10 MB (400 "Bad Request: file is too big"); the caption, optional, parsed in its
parse mode as sendMessage's text is, then over 1024 UTF-16 code units (400 "Bad
Request: message caption is too long"); the keyboard, as sendMessage's. The answer
is a Message (`caption` as shown, if any) with a `document` (file_id,
file_unique_id, file_name, mime_type, file_size), a `photo` (PhotoSizes, smallest
first: file_id, file_unique_id, width, height, file_size; the largest is the file
sent) or a `voice` (file_id, file_unique_id, duration: the `duration` given or 0,
mime_type, file_size). An upload becomes a file of the fake, which getFile and the
download serve (a photo at photos/file_N.jpg, a voice at voice/file_N.oga, a document
at documents/file_N.<its extension>). A file send taken is recorded in `sent` as a
sendMessage is (with its `method`, and `text` its caption or "") and in `uploads`
(its file's name, type, size and sha256, and its bytes when at most 1 MiB; see
`uploads`); one refused in `refused`. `wait_uploads()` waits for them.

editMessageText checks an injected fault (`fail("editMessageText", 429,
retry_after=5)`, say), the chat (empty, migrated) and the text and keyboard exactly
as sendMessage does (over 4096 units it says "Bad Request: MESSAGE_TOO_LONG", as
Telegram's edit does); then the message: one that is not in that chat, or deleted
(`delete_message()`), answers 400 "Bad Request: message to edit not found"; one not
sent by the bot, 400 "Bad Request: message can't be edited"; one that would not
change (the same text in the same parse mode and the same keyboard: Telegram
compares the rendered text and its entities, the fake what was sent) answers 400
`NOT_MODIFIED` ("Bad Request: message is not modified: specified new message content
and reply markup are exactly the same as a current content and reply markup of the
message"); a file's message, 400 "Bad Request: there is no text in the message to
edit". An edit taken replaces the message's `text` (as shown: parsed), sets its
`edit_date`, and replaces its inline keyboard with the one given, or removes it when
none is given, as Telegram does. It is recorded in `edits` (`chat_id`, `message_id`,
`text`, `parse_mode`, `reply_markup`, `at`); a refused one in `errors` only.
`shown(chat_id)` is the bot's messages in a chat as a user sees them now (after
edits, without deleted ones, oldest first), `message_now(message_id)` one message as
stored now, `wait_edits()` waits for edits, and `rate_limited` counts every 429 the
fake answered (sends, edits, any method).

The MarkdownV2 check follows Telegram's own parser: outside code, each of
_*[]()~`>#+-=|{}.! must be escaped with a backslash unless it opens or closes an
entity (*bold*, _italic_, __underline__, ~strike~, ||spoiler||, [text](url),
`code`, ```pre```, > at a line's start); inside code and pre only ` and \\ need
escaping; an entity left open is an error too.

Updates are kept for the fake's whole life, across restarts of the client, with
increasing update_ids. The test drives the fake from its own thread (every
method is thread-safe): `message()` injects a user's message (text, mentions with
their `entities`, replies, forum topics, photo / document / voice from
`add_file()`), `inject()` any other update; `fail()` answers the next matching
calls with an error, `migrate()` upgrades a group, `conflict_for()` makes every
poll answer 409 for a while (and kicks a held one), `hang_polls()` makes the
platform deaf (polls arrive, count, and get no answer until `unhang_polls()`),
`revoke_token()`, `delete_message()`. It reads what the client did in `sent`,
`refused`, `uploads`, `edits`, `actions`, `polls`, `conflicts`, `acked`, `pending`,
`answered`, `rate_limited`, `downloads`, ... and waits for it with the `wait_*`
helpers, which block on a condition (no sleeping) and raise TimeoutError naming what
they waited for. `close()` returns at once: held polls answer 503.

Flood control: `limit_rate()` (off by default) answers a sendMessage,
editMessageText or file send 429 with its retry_after once a chat goes past about one message a
second (a burst of 3) or the bot past 30 a second (a burst of 30), each bucket one
message more lenient than that; chat actions are not counted.

Buttons: `press(message, command)` (or `label=`) presses a button of the bot's sent
message (its record in `sent`, or its message_id) as a user (`user_id`, `username`,
`first_name`: Ann, 1001, by default): a `callback_query` update (returned: its
update_id), delivered by the next getUpdates (only to a poller whose allowed_updates
lets callback_query through, as Telegram does), with a fresh callback query `id`,
`from` the presser, `message` the bot's message as the fake stored it (its
`reply_markup` included), `chat_instance` and `data` the button's callback_data.
`answered` lists the answerCallbackQuery calls taken (`callback_query_id`,
`update_id` and `data` of the press, `text`, `show_alert`, `at`); `unanswered` the
ids of presses not answered yet; `wait_answered(count)` waits for them. A
callback_query given to `inject()` (one without a message or data, say) may be
answered once too; `fail("answerCallbackQuery", ...)` makes an answer fail.

In a forum supergroup, a message in a topic carries `message_thread_id`,
`is_topic_message` and, unless it replies to something else, a
`reply_to_message` that is the topic's creation message (from a user, with
`forum_topic_created`), exactly as Telegram sends it.

In its own process:

    python -m tests.fakes.telegram --token T

prints its base URL on one line and serves until killed. Another process can
drive it over HTTP: `POST {url}/_fake/<name>` with a JSON object of keyword
arguments calls one of message, press, inject, fail, clear_faults, migrate,
conflict_for, hang_polls, unhang_polls, revoke_token, set_webhook, delete_message (answer
`{"ok": true, "result": <return value>}`), and `GET {url}/_fake/state` answers
the counters and the records.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import mimetypes
import posixpath
import re
import socket
import time
from collections.abc import Callable
from typing import Any

import attrs

from tests.fakes.kit import Fake, observed, serve_until_killed
from tests.fakes.local_http import (
    ErrorShape,
    Part,
    Reply,
    TrackedHandler,
    copy_json,
    decode_object,
    query,
    routes,
)

BOT_ID = 7000000001
BOT_USERNAME = "hermes_test_bot"
BOT_FIRST_NAME = "Hermes"
BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": BOT_FIRST_NAME, "username": BOT_USERNAME}
MAX_TEXT = 4096  # UTF-16 code units, after entity parsing
CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
MIGRATED = "Bad Request: group chat was upgraded to a supergroup chat"
QUERY_GONE = "Bad Request: query is too old and response timeout expired or query ID is invalid"
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup"
    " are exactly the same as a current content and reply markup of the message"
)
EDIT_NOT_FOUND = "Bad Request: message to edit not found"
CANT_EDIT = "Bad Request: message can't be edited"
TOO_LONG = "Bad Request: message is too long"  # sendMessage's words
EDIT_TOO_LONG = "Bad Request: MESSAGE_TOO_LONG"  # editMessageText's
MAX_CALLBACK_DATA = 64  # bytes
MAX_CAPTION = 1024  # UTF-16 code units, after entity parsing
MAX_UPLOAD = 50 * 1024 * 1024  # bytes: what a bot may upload (sendDocument and the like)
MAX_PHOTO = 10 * 1024 * 1024  # bytes: a photo's own limit
KEPT_UPLOAD = 1024 * 1024  # bytes: an upload up to this keeps its `content` in `uploads`
CAPTION_TOO_LONG = "Bad Request: message caption is too long"
PHOTO_TOO_BIG = "Bad Request: file is too big"
WRONG_FILE_ID = "Bad Request: wrong file identifier/HTTP URL specified"
NO_TEXT_TO_EDIT = "Bad Request: there is no text in the message to edit"
# The methods that send a file: their canonical name and the field that carries it.
FILE_METHODS = {
    "senddocument": ("sendDocument", "document"),
    "sendphoto": ("sendPhoto", "photo"),
    "sendvoice": ("sendVoice", "voice"),
}
# The methods flood control counts (limit_rate()): every message sent or edited.
_FLOODED = frozenset({"sendmessage", "editmessagetext", *FILE_METHODS})
CHAT_ACTIONS = frozenset({
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
})  # fmt: skip
# Update kinds delivered when allowed_updates is [] (Telegram leaves these three out).
_OPT_IN_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: CONFLICT,
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_PREFIXES = {400: "Bad Request: ", 403: "Forbidden: "}
# Parameters that a form or a query string carries as JSON text.
_JSON_PARAMS = frozenset({
    "reply_parameters", "allowed_updates", "entities", "caption_entities", "reply_markup",
    "link_preview_options",
})  # fmt: skip


def utf16_len(text: str) -> int:
    """The length of `text` in UTF-16 code units, as Telegram counts it."""
    return len(text.encode("utf-16-le")) // 2


@attrs.define
class _File:
    file_id: str
    file_unique_id: str
    content: bytes
    file_path: str
    file_size: int
    file_name: str
    mime_type: str


def _without_bytes(params: dict[str, Any]) -> dict[str, Any]:
    """A call's parameters as records keep them: each uploaded file as its `info()`."""
    return {k: v.info() if isinstance(v, Part) else v for k, v in params.items()}


@attrs.define(eq=False)
class _Poll:
    conn: socket.socket | None
    kicked: bool = False  # another instance's poll terminated it (conflict_for)


@attrs.frozen
class _Content:
    """A message's text as sent (`source`: the text and its parse mode), as a user sees it
    (`plain`), and its inline keyboard (None: none)."""

    source: tuple[str, str | None]
    plain: str
    keyboard: dict[str, Any] | None


class ParseError(Exception):
    """A text that does not parse in its parse_mode (Telegram's message follows)."""


def _ok(result: Any) -> Reply:
    return Reply(200, {"ok": True, "result": result})


@attrs.define
class _Flood:
    """Telegram's flood control, as a token bucket per chat and one for the bot: a
    message (a send or an edit) takes a token from both; without one, 429 with how long
    until there is. Each bucket holds one more than the documented burst (what a client
    pacing itself exactly would never meet, clock skew aside)."""

    per_second: float
    per_chat: float
    burst: int
    chat_burst: int
    buckets: dict[Any, tuple[float, float]] = attrs.Factory(dict)  # key -> (tokens, at)

    def take(self, chat: Any, now: float) -> float:
        """0 when a message may go now (its tokens taken), else the seconds to wait."""
        limits = [("*", self.per_second, self.burst + 1),
                  (chat, self.per_chat, self.chat_burst + 1)]  # fmt: skip
        levels = []
        for key, rate, size in limits:
            tokens, at = self.buckets.get(key, (size, now))
            levels.append((key, min(size, tokens + (now - at) * rate), rate))
        short = [(1 - tokens) / rate for _, tokens, rate in levels if tokens < 1]
        if short:
            return max(short)
        for key, tokens, _ in levels:
            self.buckets[key] = (tokens - 1, now)
        return 0.0


_ERRORS = ErrorShape("description", status="error_code", fixed={"ok": False})


def _error(status: int, description: str, **parameters: Any) -> Reply:
    """Telegram's error: its `parameters` (retry_after, migrate_to_chat_id) those given."""
    given = {k: v for k, v in parameters.items() if v is not None}
    return _ERRORS.reply(status, description, **({"parameters": given} if given else {}))


def _client_gone(conn: socket.socket | None) -> bool:
    """Whether the client closed the connection a held request came on."""
    if conn is None:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _chat_key(value: Any) -> int | str | None:
    """A chat id as Telegram reads it: an int where it is one, else the text (@name)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return text


def _guess_chat_type(chat: int | str) -> str:
    """The type of a chat never seen in an injected message."""
    if isinstance(chat, str):
        return "channel"  # @channelname
    if chat > 0:
        return "private"
    return "supergroup" if str(chat).startswith("-100") else "group"


def _int(value: Any, default: int | None = None) -> int | None:
    if value is None or value == "":
        return default
    try:
        return int(float(value)) if isinstance(value, str) and "." in value else int(value)
    except (TypeError, ValueError):
        return default


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode())


# -- parse modes ----------------------------------------------------------------------

_MDV2_RESERVED = "_*[]()~`>#+-=|{}.!"
_MDV2_NAMES = {
    "bold": "Bold", "italic": "Italic", "underline": "Underline",
    "strikethrough": "Strikethrough", "spoiler": "Spoiler", "code": "Code", "pre": "Pre",
    "text_url": "TextUrl", "custom_emoji": "CustomEmoji",
}  # fmt: skip


def parse_markdown_v2(text: str) -> str:
    """The plain text of a MarkdownV2 text, or ParseError with Telegram's message (a
    port of tdlib's parse_markdown_v2, blockquotes simplified)."""
    out: list[str] = []
    stack: list[tuple[str, int]] = []  # (entity type, index where it began)
    n = len(text)

    def at(k: int) -> str:
        return text[k] if k < n else ""

    def reserved_error(k: int) -> ParseError:
        return ParseError(
            f"Character '{text[k]}' is reserved and must be escaped with the preceding '\\'"
        )

    def scan_url(k: int) -> int:
        """From just after '(' to just after the matching ')'."""
        begin = k
        while k < n and text[k] != ")":
            k += 2 if text[k] == "\\" and 0 < ord(at(k + 1) or "\0") <= 126 else 1
        if k >= n:
            raise ParseError(f"Can't find end of a URL at byte offset {_byte_offset(text, begin)}")
        return k + 1

    i = 0
    expandable = False
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and 0 < ord(text[i + 1]) <= 126:
            out.append(text[i + 1])
            i += 2
            continue
        top = stack[-1][0] if stack else None
        reserved = "`" if top in ("code", "pre") else _MDV2_RESERVED
        if c not in reserved:
            out.append(c)
            i += 1
            continue
        line_start = i == 0 or text[i - 1] == "\n"
        ends = {
            "bold": c == "*",
            "italic": c == "_" and at(i + 1) != "_",
            "code": c == "`",
            "pre": text.startswith("```", i),
            "text_url": c == "]",
            "custom_emoji": c == "]",
            "underline": text.startswith("__", i),
            "strikethrough": c == "~",
            "spoiler": text.startswith("||", i),
        }
        if top is not None and ends[top]:
            kind, _ = stack.pop()
            if kind in ("underline", "spoiler"):
                i += 2
            elif kind == "pre":
                i += 3
            elif kind == "text_url":
                i += 1
                if at(i) == "(":
                    i = scan_url(i + 1)
            elif kind == "custom_emoji":
                i += 1
                if at(i) != "(":
                    raise ParseError("Custom emoji entity must contain a tg://emoji URL")
                i = scan_url(i + 1)
            else:
                i += 1
            continue
        start = i
        if c == ">" and line_start and top is None:
            i += 1  # a blockquote line
            continue
        if c == "*" and line_start and top is None and text.startswith("**>", i):
            i += 3  # an expandable blockquote, which ends with || at a line's end
            expandable = True
            continue
        if expandable and top is None and text.startswith("||", i) and at(i + 2) in ("", "\n"):
            i += 2
            expandable = False
            continue
        if c == "_":
            kind = "underline" if at(i + 1) == "_" else "italic"
            i += 2 if kind == "underline" else 1
        elif c == "*":
            kind, i = "bold", i + 1
        elif c == "~":
            kind, i = "strikethrough", i + 1
        elif c == "|":
            if at(i + 1) != "|":
                raise reserved_error(i)
            kind, i = "spoiler", i + 2
        elif c == "[":
            kind, i = "text_url", i + 1
        elif c == "`":
            if text.startswith("```", i):
                kind, i = "pre", i + 3
                end = i
                while end < n and not text[end].isspace() and text[end] != "`":
                    end += 1
                if end != i and end < n and text[end] != "`":
                    i = end  # the language
                if at(i) in ("\n", "\r") and at(i):
                    two = at(i + 1) in ("\n", "\r") and at(i + 1) and at(i + 1) != at(i)
                    i += 2 if two else 1
            else:
                kind, i = "code", i + 1
        elif c == "!" and at(i + 1) == "[":
            kind, i = "custom_emoji", i + 2
        else:
            raise reserved_error(i)
        stack.append((kind, start))
    if stack:
        kind, start = stack[-1]
        raise ParseError(
            f"Can't find end of {_MDV2_NAMES[kind]} entity at byte offset "
            f"{_byte_offset(text, start)}"
        )
    return "".join(out)


def parse_markdown(text: str) -> str:
    """The plain text of a legacy Markdown text, or ParseError."""
    out: list[str] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            i += 2
            continue
        if c not in "_*`[":
            out.append(c)
            i += 1
            continue
        missing = ParseError(
            f"Can't find end of the entity starting at byte offset {_byte_offset(text, i)}"
        )
        if c == "[":
            close = text.find("]", i + 1)
            if close < 0:
                raise missing
            out.append(text[i + 1 : close])
            i = close + 1
            if text.startswith("(", i):
                end = text.find(")", i + 1)
                if end < 0:
                    raise missing
                i = end + 1
            continue
        marker = "```" if text.startswith("```", i) else c
        end = text.find(marker, i + len(marker))
        if end < 0:
            raise missing
        out.append(text[i + len(marker) : end])
        i = end + len(marker)
    return "".join(out)


_HTML_TAGS = frozenset({
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
})  # fmt: skip
_HTML_ENTITY = re.compile(r"&(#[0-9]+|#x[0-9a-fA-F]+|lt|gt|amp|quot);")
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_TAG_NAME = re.compile(r"[a-zA-Z0-9-]*")


def parse_html(text: str) -> str:
    """The plain text of an HTML text, or ParseError (tags must be Telegram's, nested
    properly, and a bare '<' is an unsupported tag)."""
    out: list[str] = []
    stack: list[str] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c == "&":
            match = _HTML_ENTITY.match(text, i)
            if match:
                name = match.group(1)
                if name.startswith("#x"):
                    out.append(chr(int(name[2:], 16)))
                elif name.startswith("#"):
                    out.append(chr(int(name[1:])))
                else:
                    out.append(_HTML_NAMED[name])
                i = match.end()
                continue
            out.append(c)
            i += 1
            continue
        if c != "<":
            out.append(c)
            i += 1
            continue
        offset = _byte_offset(text, i)
        closing = text.startswith("</", i)
        name_match = _TAG_NAME.match(text, i + (2 if closing else 1))
        assert name_match is not None
        name = name_match.group(0).lower()
        end = text.find(">", name_match.end())
        if closing:
            if end < 0:
                raise ParseError(f"Unclosed end tag at byte offset {offset}")
            if not stack:
                raise ParseError(f"Unexpected end tag at byte offset {offset}")
            if stack[-1] != name:
                raise ParseError(
                    f'Unmatched end tag at byte offset {offset}, expected "</{stack[-1]}>", '
                    f'found "</{name}>"'
                )
            stack.pop()
        else:
            if name not in _HTML_TAGS:
                raise ParseError(f'Unsupported start tag "{name}" at byte offset {offset}')
            if end < 0:
                raise ParseError(f"Unclosed start tag at byte offset {offset}")
            stack.append(name)
        i = end + 1
    if stack:
        raise ParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


_PARSERS: dict[str, Callable[[str], str]] = {
    "markdownv2": parse_markdown_v2,
    "markdown": parse_markdown,
    "html": parse_html,
}


def _keyboard_refusal(markup: Any) -> Reply | None:
    """Telegram's answer to a bad `reply_markup` (a send's or an edit's), or None. Only
    an inline keyboard is checked (a reply keyboard, its removal or force_reply pass as
    given)."""
    if markup is None:
        return None
    if not isinstance(markup, dict):
        return _error(400, "Bad Request: can't parse reply keyboard markup JSON object")
    if "inline_keyboard" not in markup:
        return None
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return _error(400, 'Bad Request: field "inline_keyboard" of the InlineKeyboardMarkup'
                      " should be an Array of Arrays")  # fmt: skip
    for button in (b for row in rows for b in row):
        if not isinstance(button, dict) or not isinstance(button.get("text"), str):
            return _error(400, "Bad Request: can't parse inline keyboard button: Field"
                          ' "text" must be of type String')  # fmt: skip
        if "callback_data" not in button and "url" not in button:
            return _error(400, "Bad Request: can't parse inline keyboard button: Text"
                          " buttons are unallowed in the inline keyboard")  # fmt: skip
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode()) <= MAX_CALLBACK_DATA:
            return _error(400, "Bad Request: BUTTON_DATA_INVALID")
    return None


def _content(params: dict[str, Any], too_long: str) -> _Content | Reply:
    """The text and keyboard a sendMessage or an editMessageText carries, checked as
    Telegram checks them (its text parsed in its parse mode), or the refusal."""
    text = params.get("text")
    text = "" if text is None else str(text)
    mode = params.get("parse_mode")
    plain = _parsed(text, mode)
    if isinstance(plain, Reply):
        return plain
    if not plain.strip():
        return _error(400, "Bad Request: message text is empty")
    if utf16_len(plain) > MAX_TEXT:
        return _error(400, too_long)
    keyboard = _keyboard(params)
    if isinstance(keyboard, Reply):
        return keyboard
    return _Content((text, str(mode).lower() if mode else None), plain, keyboard)


def _parsed(text: str, mode: Any) -> str | Reply:
    """`text` as shown once parsed in parse mode `mode` (none: as it is), or the refusal."""
    if not mode:
        return text
    parser = _PARSERS.get(str(mode).lower())
    if parser is None:
        return _error(400, "Bad Request: unsupported parse_mode")
    try:
        return parser(text)
    except ParseError as exc:
        return _error(400, f"Bad Request: can't parse entities: {exc}")


def _caption(params: dict[str, Any]) -> tuple[str, dict[str, Any] | None] | Reply:
    """The caption (as shown: parsed) and inline keyboard a file send carries, checked
    as Telegram checks them, or the refusal. A caption is optional; its parse mode is
    read only when there is one, as the Bot API does."""
    caption = params.get("caption")
    text = "" if caption is None else str(caption)
    mode = params.get("parse_mode")
    plain = _parsed(text, mode) if text and str(mode).lower() != "none" else text
    if isinstance(plain, Reply):
        return plain
    if utf16_len(plain) > MAX_CAPTION:
        return _error(400, CAPTION_TOO_LONG)
    keyboard = _keyboard(params)
    if isinstance(keyboard, Reply):
        return keyboard
    return plain, keyboard


def _keyboard(params: dict[str, Any]) -> dict[str, Any] | None | Reply:
    """The inline keyboard a send carries (as Telegram keeps it), or its refusal."""
    markup = params.get("reply_markup")
    refusal = _keyboard_refusal(markup)
    if refusal is not None:
        return refusal
    if isinstance(markup, dict) and "inline_keyboard" in markup:
        return {"inline_keyboard": copy_json(markup["inline_keyboard"])}
    return None


# -- the fake -------------------------------------------------------------------------


class FakeTelegram(Fake):
    """Telegram's Bot API, over HTTP, as the module's docstring tells."""

    name = "Telegram"
    _ROUTES = routes(
        ("*", "/file/bot{token}/{path*}", "_download"),
        ("*", "/bot{token}/{name}", "_call"),
    )
    _CONTROLS = frozenset({
        "message", "press", "inject", "fail", "clear_faults", "migrate", "conflict_for",
        "hang_polls", "unhang_polls", "revoke_token", "set_webhook", "delete_message",
    })  # fmt: skip
    _STATE = (
        "polls", "conflicts", "acked", "pending", "max_concurrent_polls", "held_polls", "sent",
        "refused", "actions", "deleted_webhook_calls", "answered", "unanswered", "edits",
        "rate_limited",
    )  # fmt: skip

    def __init__(
        self,
        token: str = "123456:TEST-token",
        *,
        first_update_id: int = 1,
        port: int = 0,
        max_upload: int = MAX_UPLOAD,
    ) -> None:
        """`port` 0 picks a free one; a test that needs the address before the fake
        listens (a platform that refuses connections, then comes up) names it.
        `max_upload` (an attribute a test may change) is the largest file a send takes,
        in bytes: Telegram's 50 MB for bots by default; a larger one answers 413."""
        super().__init__(port)
        self.token = token
        self.max_upload = max_upload
        self._revoked = False
        # updates
        self._next_update = first_update_id
        self._updates: list[dict[str, Any]] = []  # not yet confirmed
        self._history: dict[int, dict[str, Any]] = {}  # every update ever injected
        self._dropped: list[int] = []  # dropped by deleteWebhook(drop_pending_updates)
        self._acked = 0
        self._allowed_updates: list[str] | None = None
        self._webhook = ""
        # polls
        self._polls = 0
        self._conflicts = 0
        self._held: list[_Poll] = []
        self._max_concurrent = 0
        self._hung = False
        self._conflict_until = 0.0
        # messages and chats
        self._message_ids = itertools.count(1)
        self._messages: dict[int, dict[str, Any]] = {}  # message_id -> Message (both ways)
        self._sources: dict[int, tuple[str, str | None]] = {}  # the bot's: (text, parse mode)
        self._edits: list[dict[str, Any]] = []
        self._chats: dict[int | str, dict[str, Any]] = {}
        self._migrated: dict[int | str, int] = {}
        self._flood: _Flood | None = None  # limit_rate(): flood control on
        # button presses
        self._query_ids = itertools.count(1)
        self._queries: dict[str, dict[str, Any]] = {}  # callback query id -> its press
        self._answered: list[dict[str, Any]] = []
        # files
        self._file_numbers = itertools.count(1)
        self._files: dict[str, _File] = {}  # by file_id
        self._file_paths: dict[str, _File] = {}
        self._thumbs: dict[str, list[dict[str, Any]]] = {}
        # records
        self._refused: list[dict[str, Any]] = []
        self._errors: list[dict[str, Any]] = []
        self._actions: list[dict[str, Any]] = []
        self._deleted_webhook: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []
        self._downloads: list[str] = []
        self._uploads: list[dict[str, Any]] = []

    # -- lifecycle ------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """`{url}/bot{token}`: append `/getMe` and so on."""
        return f"{self.url}/bot{self.token}"

    def close(self) -> None:
        """Stop serving: held (and hung) polls answer 503 at once, kept-alive
        connections are shut, and nothing is waited for."""
        self._stop()

    # -- injecting updates ------------------------------------------------------

    def add_file(
        self,
        content: bytes,
        path: str | None = None,
        *,
        size: int | None = None,
        file_name: str | None = None,
        mime_type: str | None = None,
    ) -> str:
        """A file on Telegram's servers, downloadable at `{url}/file/bot{token}/{path}`;
        returns its file_id. `size` is the size getFile and messages report (default the
        content's): a 25 MB file without storing 25 MB. The download serves `content`,
        kept as given when it is `bytes` (never copied: many files may share one)."""
        with self._cond:
            n = next(self._file_numbers)
            if path is None:
                path = f"documents/file_{n}.bin"
            path = path.lstrip("/")
            if path in self._file_paths:
                raise ValueError(f"a file at {path!r} exists already")
            name = file_name or posixpath.basename(path)
            mime = mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
            file = _File(
                file_id=f"BQACAgIAAxkBAAI{n:08d}",
                file_unique_id=f"AgAD{n:08d}",
                content=content if type(content) is bytes else bytes(content),
                file_path=path,
                file_size=len(content) if size is None else size,
                file_name=name,
                mime_type=mime,
            )
            self._files[file.file_id] = file
            self._file_paths[path] = file
            return file.file_id

    def message(
        self,
        text: str = "",
        *,
        chat_id: int | None = None,
        user_id: int = 1001,
        username: str | None = "ann",
        first_name: str = "Ann",
        chat_type: str = "private",
        title: str | None = None,
        is_forum: bool = False,
        thread_id: int | None = None,
        reply_to_bot: bool = False,
        reply_to_message_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        is_bot: bool = False,
        photo: str | None = None,
        document: str | None = None,
        voice: str | None = None,
        duration: int = 3,
        update_kind: str = "message",
    ) -> int:
        """A user writes: a new update (returned: its update_id), handed to a held poll
        at once.

        The chat is `chat_id` (default: the user's id in a private chat, -4001 for a
        group, -1001000000001 for a supergroup); `is_forum` makes it a forum supergroup
        and `thread_id` the topic. `reply_to_bot` makes the message reply to the bot's
        last message in the chat (or to `reply_to_message_id`, as the bot's);
        `reply_to_message_id` alone replies to that message as it is known (a message
        injected or sent earlier), else to some other user's. Each "@hermes_test_bot"
        in the text (or caption) gets a `mention` entity at its UTF-16 offset, a leading
        /command a `bot_command` one, unless `entities` is given. With `photo`,
        `document` or `voice` (file_ids from `add_file`), the text is the caption."""
        with self._cond:
            if is_forum:
                chat_type = "supergroup"
            if chat_id is None:
                chat_id = {"private": user_id, "group": -4001}.get(chat_type, -1001000000001)
            chat = self._chat_object(chat_id, chat_type, title, is_forum, first_name, username)
            self._chats[chat_id] = chat
            user: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
            if username:
                user["username"] = username
            now = int(time.time())
            reply_to = self._reply_target(
                chat, reply_to_bot, reply_to_message_id, thread_id if is_forum else None, user
            )  # first: a message it makes up has an earlier id than the reply
            message_id = next(self._message_ids)
            msg: dict[str, Any] = {
                "message_id": message_id, "from": user, "chat": chat, "date": now,
            }  # fmt: skip
            if thread_id is not None:
                msg["message_thread_id"] = thread_id
                if is_forum:
                    msg["is_topic_message"] = True
            if reply_to is not None:
                msg["reply_to_message"] = reply_to
            media = photo is not None or document is not None or voice is not None
            if photo is not None:
                msg["photo"] = self._photo_sizes(photo)
            if document is not None:
                file = self._file(document)
                msg["document"] = {
                    "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                    "file_name": file.file_name, "mime_type": file.mime_type,
                    "file_size": file.file_size,
                }  # fmt: skip
            if voice is not None:
                file = self._file(voice)
                msg["voice"] = {
                    "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                    "duration": duration, "mime_type": "audio/ogg", "file_size": file.file_size,
                }  # fmt: skip
            key = "caption" if media else "text"
            if text or not media:
                msg[key] = text
                found = self._entities_of(text) if entities is None else entities
                if found:
                    msg[f"{key}_entities" if media else "entities"] = found
            self._messages[message_id] = msg
            return self._add_update({update_kind: msg})

    def limit_rate(
        self,
        per_second: float = 30.0,
        per_chat: float = 1.0,
        burst: int = 30,
        chat_burst: int = 3,
    ) -> None:
        """Flood control from now on, as Telegram's FAQ describes it: about 30 messages a
        second overall and one a second per chat, sends and edits alike; a message over
        it is answered 429 with its retry_after (counted in `rate_limited`)."""
        with self._cond:
            self._flood = _Flood(per_second, per_chat, burst, chat_burst)

    def inject(self, update: dict[str, Any]) -> int:
        """Any other update (an edited_message, a callback_query, a my_chat_member ...):
        `update` without its update_id, which the fake gives (returned). A callback_query's
        `id` may be answered once, as one from `press()`."""
        with self._cond:
            update_id = self._add_update(dict(update))
            query = update.get("callback_query")
            if isinstance(query, dict) and "id" in query:
                self._add_query(str(query["id"]), update_id, query.get("data"))
            return update_id

    def update(self, update_id: int) -> dict[str, Any]:
        """An update injected earlier, as it is delivered (confirmed or not)."""
        with self._cond:
            return json.loads(json.dumps(self._history[update_id]))

    def press(
        self,
        message: int | dict[str, Any],
        command: str | None = None,
        *,
        label: str | None = None,
        user_id: int = 1001,
        username: str | None = "ann",
        first_name: str = "Ann",
    ) -> int:
        """A user presses a button of the bot's message `message` (its record in `sent`,
        or its message_id): the button whose callback_data is `command`, or whose text is
        `label`. A new `callback_query` update (returned: its update_id), handed to a
        held poll at once; its query `id` is fresh, for answerCallbackQuery.
        ValueError for a message the fake does not know or a button it does not carry."""
        message_id = _int(message.get("message_id") if isinstance(message, dict) else message)
        if (command is None) == (label is None):
            raise ValueError("press needs a button: its command or its label (one of them)")
        with self._cond:
            stored = self._messages.get(message_id) if message_id is not None else None
            if stored is None:
                raise ValueError(f"no message {message_id} to press a button of")
            buttons = [b for row in (stored.get("reply_markup") or {}).get("inline_keyboard", ())
                       for b in row]  # fmt: skip
            found = next((b for b in buttons if "callback_data" in b and (
                b["callback_data"] == command if command is not None else b["text"] == label
            )), None)  # fmt: skip
            if found is None:
                shown = [(b.get("text"), b.get("callback_data")) for b in buttons]
                raise ValueError(f"message {message_id} has no button {command or label!r}:"
                                 f" it has {shown}")  # fmt: skip
            user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
            if username:
                user["username"] = username
            query_id = str(4_000_000_000_000_000_000 + next(self._query_ids))
            update_id = self._add_update({"callback_query": {
                "id": query_id, "from": user, "message": copy_json(stored),
                "chat_instance": f"instance{stored['chat']['id']}",
                "data": found["callback_data"],
            }})  # fmt: skip
            self._add_query(query_id, update_id, found["callback_data"])
            return update_id

    # -- faults -----------------------------------------------------------------

    def fail(
        self,
        method: str,
        status: int,
        description: str | None = None,
        *,
        retry_after: float | None = None,
        migrate_to_chat_id: int | None = None,
        chat_id: int | str | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` ("*": any method, getUpdates included;
        only those to `chat_id` if given) answer `status` with `description` (default:
        Telegram's for the status; "chat not found" becomes "Bad Request: chat not
        found", and so on) and `parameters` `retry_after` (a 429 gets 1 if not given)
        and `migrate_to_chat_id`. Faults queue: each call takes the first that matches."""
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None:
            if status == 429:
                description = f"Too Many Requests: retry after {retry_after:g}"
            else:
                description = _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")
        prefix = _PREFIXES.get(status)
        if prefix and not description.startswith(prefix.split(":")[0]):
            description = prefix + description
        if isinstance(retry_after, float) and retry_after.is_integer():
            retry_after = int(retry_after)
        reply = _error(status, description, retry_after=retry_after,
                       migrate_to_chat_id=migrate_to_chat_id)  # fmt: skip
        with self._cond:
            self._faults.add(reply, method.lower(), _chat_key(chat_id), times)

    def migrate(self, old_chat_id: int, new_chat_id: int) -> None:
        """The group `old_chat_id` becomes the supergroup `new_chat_id`: from now on
        sendMessage, the file sends, editMessageText and sendChatAction to the old id
        answer 400 with `parameters.migrate_to_chat_id`; the new id works."""
        with self._cond:
            self._migrated[_chat_key(old_chat_id)] = new_chat_id
            old = self._chats.get(old_chat_id, {})
            self._chats[new_chat_id] = {
                "id": new_chat_id, "type": "supergroup", "title": old.get("title", "Test group"),
            }  # fmt: skip

    def delete_message(self, message_id: int) -> None:
        """A user deletes the message `message_id` (in whatever chat): an edit of it answers
        "message to edit not found", and it no longer shows in its chat. ValueError for a
        message the fake does not know."""
        with self._cond:
            if self._messages.pop(_int(message_id), None) is None:
                raise ValueError(f"no message {message_id} to delete")
            self._cond.notify_all()

    def conflict_for(self, seconds: float) -> None:
        """Another instance polls for `seconds` from now: every getUpdates in that window
        answers 409 at once, and a poll held now answers 409 (all counted in
        `conflicts`). `conflict_for(0)` ends the window."""
        with self._cond:
            self._conflict_until = time.monotonic() + seconds
            if seconds > 0:
                for poll in self._held:
                    poll.kicked = True
            self._cond.notify_all()

    def hang_polls(self) -> None:
        """Go deaf: getUpdates calls arrive (and count) but get no answer until
        `unhang_polls()` or `close()`."""
        self._change(_hung=True)

    def unhang_polls(self) -> None:
        """Hung polls go on as if they had just been held (answered at once if an update
        waits, else `[]` if their timeout has passed meanwhile)."""
        self._change(_hung=False)

    def revoke_token(self) -> None:
        """Every call from now on answers 401, held polls included, whatever the token."""
        self._change(_revoked=True)

    def set_webhook(self, url: str = "https://example.invalid/hook") -> None:
        """A webhook is set: getUpdates answers 409 until deleteWebhook."""
        self._change(_webhook=url)

    # -- observing ----------------------------------------------------------------

    sent = observed("_sent", """The sends taken, in order (sendMessage, and sendDocument,
        sendPhoto, sendVoice alike): their parameters (an uploaded file as `file_name`,
        `mime_type`, `size`; not its bytes), `method` ("sendMessage", "sendDocument"
        ...), `chat_id` (an int where it is one), `text` (a file's: its caption as
        given, "" if none), `message_id` and `at` (time.monotonic() of arrival).""")  # fmt: skip
    refused = observed("_refused", """The sends answered with an error, in order: as in
        `sent` (no message_id) plus `error_code`, `description` and `parameters` if
        any.""")  # fmt: skip
    uploads = observed("_uploads", """The file sends taken (sendDocument, sendPhoto,
        sendVoice), in order: `method`, `chat_id` (an int where it is one), `message_id`,
        `field` ("document", "photo", "voice"), `file_id` (the fake's file it became, or
        the one sent again), `resent` (True: a file_id, no upload), `file_name` and
        `mime_type` as uploaded (the part's; None: none given), `size`, `sha256` (hex),
        `caption` (as given, None if not), `reply_parameters` (parsed), `message_thread_id`,
        `at` (time.monotonic() of arrival) and `content`: the bytes, for a file of at most
        1 MiB, else None (a big upload is kept once, as the fake's file).""")  # fmt: skip
    edits = observed("_edits", """The editMessageText calls taken, in order: `chat_id` (an
        int where it is one), `message_id`, `text` and `parse_mode` as given (None if
        not), `reply_markup` (None if not given), `at` (time.monotonic() of arrival).
        Refused ones (not modified, not found, a fault) are in `errors` only.""")  # fmt: skip
    rate_limited = observed("_errors", """How many calls were answered 429, whatever the
        method (sendMessage and editMessageText included).""",
        lambda errors: sum(1 for e in errors if e["error_code"] == 429))  # fmt: skip
    errors = observed("_errors", """Every call answered ok: false, whatever its method
        (getUpdates included): `method`, `params`, `error_code`, `description`,
        `at`.""")  # fmt: skip
    calls = observed("_calls", """Every Bot API call that reached a method, in order:
        `method` (as spelt by the client), `params`, `status` (None while a poll is
        held), `at`.""")  # fmt: skip
    actions = observed("_actions", """The sendChatAction calls taken: `chat_id`, `action`,
        `message_thread_id`, `at`.""")  # fmt: skip
    polls = observed("_polls", "getUpdates calls that arrived in the fake's life (any answer).")
    conflicts = observed("_conflicts", """getUpdates calls answered 409 (concurrent poller,
        conflict_for, a webhook).""")  # fmt: skip
    acked = observed("_acked", "The highest update_id confirmed by a getUpdates offset (0: none).")
    dropped = observed("_dropped", """The update_ids dropped by
        deleteWebhook(drop_pending_updates=true).""")  # fmt: skip
    max_concurrent_polls = observed("_max_concurrent", """The most getUpdates calls open at
        once (a client gone is not open).""")  # fmt: skip
    deleted_webhook_calls = observed("_deleted_webhook", """The deleteWebhook calls:
        `drop_pending_updates` (bool, False when not passed), `passed` (whether it was),
        `at`.""")  # fmt: skip
    answered = observed("_answered", """The answerCallbackQuery calls taken, in order:
        `callback_query_id`, the press's `update_id` and `data`, `text` (None if not
        given), `show_alert`, `at`.""")  # fmt: skip
    unanswered = observed(
        "_queries",
        "The callback query ids of presses not answered yet.",
        lambda queries: [q for q, v in queries.items() if not v["answered"]],
    )
    allowed_updates = observed("_allowed_updates", """The allowed_updates last passed to
        getUpdates (None: never).""")  # fmt: skip
    downloads = observed("_downloads", "The file paths downloaded, in order.")

    def sent_to(self, chat_id: int | str) -> list[dict[str, Any]]:
        """The sends taken in one chat."""
        key = _chat_key(chat_id)
        with self._cond:
            return copy_json([s for s in self._sent if s["chat_id"] == key])

    def shown(self, chat_id: int | str) -> list[str]:
        """The bot's messages in one chat as a user sees them now, oldest first: their
        plain text after parsing, after every edit, without the deleted ones."""
        key = _chat_key(chat_id)
        with self._cond:
            mine = [m for m in self._messages.values()
                    if m["chat"]["id"] == key and m["from"]["id"] == BOT_ID]  # fmt: skip
            return [m.get("text", m.get("caption", ""))
                    for m in sorted(mine, key=lambda m: m["message_id"])]  # fmt: skip

    def message_now(self, message_id: int) -> dict[str, Any]:
        """A message as Telegram holds it now (its `text` as shown, its `edit_date` once
        edited, its `reply_markup`); KeyError for one unknown or deleted."""
        with self._cond:
            return copy_json(self._messages[_int(message_id)])

    pending = observed("_updates", "The update_ids neither confirmed nor dropped.",
                       lambda updates: [u["update_id"] for u in updates])  # fmt: skip
    held_polls = observed("_held", "getUpdates calls held now (hung ones included).", len)

    def wait_sent(
        self, count: int, timeout: float = 10.0, *, chat_id: int | str | None = None
    ) -> list[dict[str, Any]]:
        """The sends taken (in `chat_id` if given), once at least `count` were."""
        key = _chat_key(chat_id)
        where = "" if key is None else f" to chat {key}"
        return self._wait_records("_sent", count, timeout, f"{count} send(s){where}",
                                  lambda s: key in (None, s["chat_id"]))  # fmt: skip

    def wait_uploads(
        self, count: int = 1, timeout: float = 10.0, *, chat_id: int | str | None = None
    ) -> list[dict[str, Any]]:
        """The file sends taken (to `chat_id` if given), once at least `count` were."""
        key = _chat_key(chat_id)
        where = "" if key is None else f" to chat {key}"
        return self._wait_records("_uploads", count, timeout, f"{count} file upload(s){where}",
                                  lambda u: key in (None, u["chat_id"]))  # fmt: skip

    def wait_edits(
        self, count: int, timeout: float = 10.0, *, message_id: int | None = None
    ) -> list[dict[str, Any]]:
        """The edits taken (of `message_id` if given), once at least `count` were."""
        mid = _int(message_id)
        what = f"{count} editMessageText(s)" + ("" if mid is None else f" of message {mid}")
        return self._wait_records("_edits", count, timeout, what,
                                  lambda e: mid in (None, e["message_id"]))  # fmt: skip

    def wait_refused(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The refused sends, once at least `count` were."""
        return self._wait_records("_refused", count, timeout, f"{count} refused send(s)")

    def wait_actions(
        self, count: int, timeout: float = 10.0, *, action: str | None = None
    ) -> list[dict[str, Any]]:
        """The chat actions taken (of `action` if given), once at least `count` were."""
        return self._wait_records("_actions", count, timeout, f"{count} chat action(s)",
                                  lambda a: action in (None, a["action"]))  # fmt: skip

    def wait_errors(
        self, count: int, timeout: float = 10.0, *, method: str | None = None
    ) -> list[dict[str, Any]]:
        """The calls answered with an error (of `method` if given), once `count` were."""
        wanted = None if method is None else method.lower()
        return self._wait_records("_errors", count, timeout, f"{count} error answer(s)",
                                  lambda e: wanted in (None, e["method"].lower()))  # fmt: skip

    def wait_answered(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The answerCallbackQuery calls taken, once at least `count` were."""
        return self._wait_records("_answered", count, timeout, f"{count} answered press(es)")

    def wait_polls(self, count: int, timeout: float = 10.0) -> None:
        """Until `count` getUpdates calls arrived in the fake's life."""
        self._wait(lambda: self._polls >= count, timeout, f"{count} getUpdates call(s)")

    def wait_held_polls(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until at least `count` getUpdates calls are held now."""
        self._wait(lambda: len(self._held) >= count, timeout, f"{count} held getUpdates")

    def wait_acked(self, update_id: int, timeout: float = 10.0) -> None:
        """Until a getUpdates offset confirmed `update_id`."""
        self._wait(lambda: self._acked >= update_id, timeout, f"update {update_id} confirmed")

    def wait_conflicts(self, count: int, timeout: float = 10.0) -> None:
        """Until `count` getUpdates calls were answered 409."""
        self._wait(lambda: self._conflicts >= count, timeout, f"{count} 409 conflict(s)")

    # -- internals of injection (called holding the lock) -------------------------

    def _add_update(self, body: dict[str, Any]) -> int:
        update_id = self._next_update
        self._next_update += 1
        update = {"update_id": update_id, **body}
        self._updates.append(update)
        self._history[update_id] = update
        self._cond.notify_all()
        return update_id

    def _add_query(self, query_id: str, update_id: int, data: Any) -> None:
        """A press that answerCallbackQuery may answer once."""
        self._queries[query_id] = {"update_id": update_id, "data": data, "answered": False}

    def _chat_object(
        self,
        chat_id: int,
        chat_type: str,
        title: str | None,
        is_forum: bool,
        first_name: str,
        username: str | None,
    ) -> dict[str, Any]:
        if chat_type == "private":
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
            if username:
                chat["username"] = username
            return chat
        chat = {"id": chat_id, "type": chat_type, "title": title or "Test group"}
        if is_forum:
            chat["is_forum"] = True
        return chat

    def _reply_target(
        self,
        chat: dict[str, Any],
        reply_to_bot: bool,
        reply_to_message_id: int | None,
        topic: int | None,
        user: dict[str, Any],
    ) -> dict[str, Any] | None:
        now = int(time.time())
        if reply_to_bot or reply_to_message_id is not None:
            known = self._messages.get(reply_to_message_id) if reply_to_message_id else None
            if reply_to_bot and reply_to_message_id is None:
                mine = [
                    m for m in self._messages.values()
                    if m["chat"]["id"] == chat["id"] and m["from"]["id"] == BOT_ID
                ]  # fmt: skip
                known = mine[-1] if mine else None
            if known is not None and (not reply_to_bot or known["from"]["id"] == BOT_ID):
                target = {k: v for k, v in known.items() if k != "reply_to_message"}
            else:
                sender = BOT_USER if reply_to_bot else {
                    "id": 1999, "is_bot": False, "first_name": "Someone", "username": "someone"
                }  # fmt: skip
                target = {
                    "message_id": reply_to_message_id or next(self._message_ids),
                    "from": dict(sender), "chat": chat, "date": now, "text": "(earlier)",
                }  # fmt: skip
            if topic is not None:
                target.setdefault("message_thread_id", topic)
                target.setdefault("is_topic_message", True)
            return target
        if topic is not None:  # Telegram: a topic's messages reply to its creation message
            return {
                "message_id": topic, "from": user, "chat": chat, "date": now,
                "message_thread_id": topic, "is_topic_message": True,
                "forum_topic_created": {"name": f"Topic {topic}", "icon_color": 7322096},
            }  # fmt: skip
        return None

    def _file(self, file_id: str) -> _File:
        try:
            return self._files[file_id]
        except KeyError:
            raise KeyError(f"no file {file_id!r}: add_file() it first") from None

    def _photo_sizes(self, file_id: str) -> list[dict[str, Any]]:
        """A photo as Telegram sends it: sizes, smallest first, each its own file; the
        largest is the file added."""
        file = self._file(file_id)
        if file_id not in self._thumbs:
            sizes = []
            for width, height in ((90, 67), (320, 240)):
                content = file.content[: min(len(file.content), width * 20)]
                thumb = self._file(self._add_file_locked(
                    content, f"{file.file_path}_{width}.jpg", "image/jpeg"
                ))  # fmt: skip
                sizes.append({
                    "file_id": thumb.file_id, "file_unique_id": thumb.file_unique_id,
                    "file_size": thumb.file_size, "width": width, "height": height,
                })  # fmt: skip
            sizes.append({
                "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                "file_size": file.file_size, "width": 1280, "height": 960,
            })  # fmt: skip
            self._thumbs[file_id] = sizes
        return copy_json(self._thumbs[file_id])

    def _add_file_locked(self, content: bytes, path: str, mime: str) -> str:
        n = next(self._file_numbers)
        file = _File(
            file_id=f"AgACAgIAAxkBAAI{n:08d}", file_unique_id=f"AQAD{n:08d}",
            content=content, file_path=path, file_size=len(content),
            file_name=posixpath.basename(path), mime_type=mime,
        )  # fmt: skip
        self._files[file.file_id] = file
        self._file_paths[path] = file
        return file.file_id

    @staticmethod
    def _entities_of(text: str) -> list[dict[str, Any]]:
        found = []
        command = re.match(r"/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?", text)
        if command:
            found.append({"type": "bot_command", "offset": 0, "length": utf16_len(command[0])})
        mention = "@" + BOT_USERNAME
        for match in re.finditer(re.escape(mention) + r"(?![A-Za-z0-9_])", text, re.IGNORECASE):
            if command and match.start() < command.end():
                continue
            found.append({
                "type": "mention", "offset": utf16_len(text[: match.start()]),
                "length": utf16_len(match[0]),
            })  # fmt: skip
        return found

    # -- serving (handler threads) --------------------------------------------------

    def _internal_error(self) -> Reply:
        return _error(500, "Internal Server Error: the fake failed")

    def _no_route(self, request: TrackedHandler, status: int) -> Reply:
        return _error(404, "Not Found")

    def _call(self, request: TrackedHandler, raw: bytes, token: str, name: str) -> Reply | None:
        """A Bot API call; None: the client went away while its poll was held."""
        try:
            params = query(request.path)
            params.update(decode_object(request.headers.get("content-type", ""), raw))
            for key in _JSON_PARAMS & params.keys():
                if isinstance(params[key], str):
                    try:
                        params[key] = json.loads(params[key])
                    except ValueError:
                        raise ValueError(f"can't parse {key} JSON object") from None
        except ValueError as exc:
            return _error(400, f"Bad Request: {exc}")
        method = name.lower()
        kept = _without_bytes(params)  # what the records keep: no uploaded bytes
        with self._cond:
            call = {"method": name, "params": kept, "status": None, "at": time.monotonic()}
            self._calls.append(call)
            if method == "getupdates":
                self._polls += 1
            self._cond.notify_all()
        reply = self._dispatch(method, token, params, request.connection)
        with self._cond:
            call["status"] = None if reply is None else reply.status
            if reply is not None and isinstance(reply.body, dict) and not reply.body.get("ok"):
                self._errors.append({
                    "method": name, "params": kept, "error_code": reply.status,
                    "description": reply.body.get("description"), "at": call["at"],
                })  # fmt: skip
            self._cond.notify_all()
        return reply

    def _dispatch(
        self, method: str, token: str, params: dict[str, Any], conn: socket.socket
    ) -> Reply | None:
        with self._cond:
            if self._revoked or token != self.token:
                return _error(401, "Unauthorized")
        if method == "getupdates":
            return self._get_updates(params, conn)
        if method == "sendmessage":
            return self._send_message(params)
        if method == "editmessagetext":
            return self._edit_message_text(params)
        if method == "sendchataction":
            return self._send_chat_action(params)
        if method in FILE_METHODS:
            return self._send_file(*FILE_METHODS[method], params)
        with self._cond:
            fault = self._faults.take(method, None)
            if fault is not None:
                return fault
            if method == "getme":
                return _ok({
                    **BOT_USER, "can_join_groups": True,
                    "can_read_all_group_messages": False, "supports_inline_queries": False,
                })  # fmt: skip
            if method == "deletewebhook":
                passed = "drop_pending_updates" in params
                drop = _bool(params.get("drop_pending_updates", False))
                self._deleted_webhook.append(
                    {"drop_pending_updates": drop, "passed": passed, "at": time.monotonic()}
                )
                self._webhook = ""
                if drop:
                    self._dropped.extend(u["update_id"] for u in self._updates)
                    self._updates.clear()
                self._cond.notify_all()
                return _ok(True)
            if method == "setwebhook":
                self._webhook = str(params.get("url", ""))
                self._cond.notify_all()
                return _ok(True)
            if method == "getwebhookinfo":
                return _ok({
                    "url": self._webhook, "has_custom_certificate": False,
                    "pending_update_count": len(self._updates),
                })  # fmt: skip
            if method in ("setmycommands", "deletemycommands"):
                return _ok(True)
            if method == "answercallbackquery":
                return self._answer_callback_query(params)
            if method == "getfile":
                file = self._files.get(str(params.get("file_id", "")))
                if file is None:
                    return _error(400, "Bad Request: invalid file_id")
                return _ok({
                    "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                    "file_size": file.file_size, "file_path": file.file_path,
                })  # fmt: skip
        return _error(404, "Not Found")

    def _get_updates(self, params: dict[str, Any], conn: socket.socket) -> Reply | None:
        offset = _int(params.get("offset"), 0) or 0
        limit = max(1, min(100, _int(params.get("limit"), 100) or 100))
        try:
            timeout = max(0.0, float(params.get("timeout") or 0))
        except (TypeError, ValueError):
            return _error(400, "Bad Request: wrong parameter timeout")
        allowed = params.get("allowed_updates")
        with self._cond:
            fault = self._faults.take("getupdates", None)
            if fault is not None:
                if fault.status == 409:
                    self._conflicts += 1
                return fault
            now = time.monotonic()
            if now < self._conflict_until:
                self._conflicts += 1
                return _error(409, CONFLICT)
            if self._webhook:
                self._conflicts += 1
                return _error(409, WEBHOOK_CONFLICT)
            self._held = [p for p in self._held if not _client_gone(p.conn)]
            self._max_concurrent = max(self._max_concurrent, len(self._held) + 1)
            if self._held:
                self._conflicts += 1
                return _error(409, CONFLICT)
            self._confirm(offset)
            if offset < 0:
                offset = self._updates[0]["update_id"] if self._updates else self._next_update
            if isinstance(allowed, list):
                self._allowed_updates = [str(a) for a in allowed]
            poll = _Poll(conn)
            self._held.append(poll)
            self._cond.notify_all()
            deadline = now + timeout
            try:
                while True:
                    if self._closing:
                        return _error(503, "Service Unavailable")
                    if self._revoked:
                        return _error(401, "Unauthorized")
                    if poll.kicked:
                        self._conflicts += 1
                        return _error(409, CONFLICT)
                    if _client_gone(conn):
                        return None
                    if not self._hung:
                        ready = self._deliverable(offset, limit)
                        if ready:
                            return _ok(ready)
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return _ok([])
                    else:
                        left = 0.1
                    # wake now and then to see whether the client is still there
                    self._cond.wait(min(left, 0.1))
            finally:
                if poll in self._held:
                    self._held.remove(poll)
                self._cond.notify_all()

    def _confirm(self, offset: int) -> None:
        if offset > 0:
            self._acked = max(self._acked, offset - 1)
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:  # -N: the last N updates; every earlier one is forgotten
            keep = self._updates[offset:]
            if len(keep) < len(self._updates):
                self._acked = max(self._acked, keep[0]["update_id"] - 1 if keep else 0)
            self._updates = keep
        self._cond.notify_all()

    def _deliverable(self, offset: int, limit: int) -> list[dict[str, Any]]:
        allowed = self._allowed_updates
        if allowed is not None:
            wanted = set(allowed) if allowed else None

            def passes(update: dict[str, Any]) -> bool:
                kind = next((k for k in update if k != "update_id"), "")
                return kind in wanted if wanted is not None else kind not in _OPT_IN_UPDATES

            self._updates = [u for u in self._updates if passes(u)]  # others are never sent
        ready = [u for u in self._updates if u["update_id"] >= offset][:limit]
        return copy_json(ready)

    def _send_message(self, params: dict[str, Any]) -> Reply:
        chat = _chat_key(params.get("chat_id"))
        record = {**params, "method": "sendMessage", "chat_id": chat, "at": time.monotonic()}
        with self._cond:
            reply = self._check_message(params, chat)
            if reply.status != 200:
                self._refuse(record, reply)
            else:
                assert isinstance(reply.body, dict)
                record["message_id"] = reply.body["result"]["message_id"]
                self._sent.append(record)
            self._cond.notify_all()
            return reply

    def _chat_refusal(self, method: str, chat: int | str | None) -> Reply | None:
        """A fault, no chat or a migrated group: the refusal of a send (holding the lock)."""
        fault = self._faults.take(method, chat)
        if fault is not None:
            return fault
        if chat is None:
            return _error(400, "Bad Request: chat_id is empty")
        if chat in self._migrated:
            return _error(400, MIGRATED, migrate_to_chat_id=self._migrated[chat])
        if self._flood is not None and method in _FLOODED:
            wait = self._flood.take(chat, time.monotonic())
            if wait > 0:
                seconds = math.ceil(wait)
                return _error(429, f"Too Many Requests: retry after {seconds}",
                              retry_after=seconds)  # fmt: skip
        return None

    def _check_message(self, params: dict[str, Any], chat: int | str | None) -> Reply:
        """The answer to a sendMessage (holding the lock); a message taken is stored."""
        refusal = self._chat_refusal("sendmessage", chat)
        if refusal is not None:
            return refusal
        content = _content(params, TOO_LONG)
        if isinstance(content, Reply):
            return content
        message = self._bot_message(params, chat, {"text": content.plain}, content.keyboard)
        self._sources[message["message_id"]] = content.source
        return _ok(copy_json(message))

    def _bot_message(
        self,
        params: dict[str, Any],
        chat: int | str,
        body: dict[str, Any],
        keyboard: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """A message the bot sends, stored: a new message_id, its chat, its topic and
        the message it replies to (from `params`), `body` (its text, or its file and
        caption), its inline keyboard (holding the lock)."""
        thread = _int(params.get("message_thread_id"))
        reply_parameters = params.get("reply_parameters")
        reply_id = None
        if isinstance(reply_parameters, dict):
            reply_id = _int(reply_parameters.get("message_id"))
        elif params.get("reply_to_message_id") is not None:
            reply_id = _int(params.get("reply_to_message_id"))
        chat_object = self._chats.get(chat) or {
            "id": chat, "type": _guess_chat_type(chat),
        }  # fmt: skip
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "from": dict(BOT_USER),
            "chat": chat_object, "date": int(time.time()), **body,
        }  # fmt: skip
        if thread is not None:
            message["message_thread_id"] = thread
            if chat_object.get("is_forum"):
                message["is_topic_message"] = True
        if reply_id is not None and reply_id in self._messages:
            message["reply_to_message"] = {
                k: v for k, v in self._messages[reply_id].items() if k != "reply_to_message"
            }
        if keyboard is not None:
            message["reply_markup"] = keyboard
        self._messages[message["message_id"]] = message
        return message

    def _send_file(self, method: str, field: str, params: dict[str, Any]) -> Reply:
        """sendDocument, sendPhoto or sendVoice (`method`, its file in `field`)."""
        chat = _chat_key(params.get("chat_id"))
        at = time.monotonic()
        caption = params.get("caption")
        record = {
            **_without_bytes(params), "method": method, "chat_id": chat,
            "text": "" if caption is None else str(caption), "at": at,
        }  # fmt: skip
        with self._cond:
            reply, file, upload = self._check_file(method, field, params, chat)
            assert isinstance(reply.body, dict)
            if reply.status != 200:
                self._refuse(record, reply)
            else:
                assert file is not None
                message_id = reply.body["result"]["message_id"]
                record["message_id"] = message_id
                self._sent.append(record)
                content = file.content if upload is None else upload.data
                self._uploads.append({
                    "method": method, "chat_id": chat, "message_id": message_id,
                    "field": field, "file_id": file.file_id, "resent": upload is None,
                    "file_name": file.file_name if upload is None else upload.filename,
                    "mime_type": file.mime_type if upload is None else upload.mime_type,
                    "size": len(content), "sha256": hashlib.sha256(content).hexdigest(),
                    "caption": caption, "reply_parameters": params.get("reply_parameters"),
                    "message_thread_id": _int(params.get("message_thread_id")), "at": at,
                    "content": content if len(content) <= KEPT_UPLOAD else None,
                })  # fmt: skip
            self._cond.notify_all()
            return reply

    def _check_file(
        self, method: str, field: str, params: dict[str, Any], chat: int | str | None
    ) -> tuple[Reply, _File | None, Part | None]:
        """The answer to a file send (holding the lock), the fake's file it sent and the
        upload it came from (None: a file_id sent again). A file taken is stored and
        downloadable, and its message stored."""
        refusal = self._chat_refusal(method.lower(), chat)
        if refusal is not None:
            return refusal, None, None
        value = params.get(field)
        missing = field
        if isinstance(value, str) and value.strip().startswith("attach://"):
            missing = value.strip()[len("attach://") :]
            value = params.get(missing)
            if not isinstance(value, Part):
                value = None
        if value is None or isinstance(value, str) and not value.strip():
            return _error(400, f"Bad Request: there is no {missing} in the request"), None, None
        upload = value if isinstance(value, Part) else None
        file = None
        if upload is None:
            file = self._files.get(str(value).strip()) if isinstance(value, str) else None
            if file is None:
                return _error(400, WRONG_FILE_ID), None, None
        else:
            if len(upload.data) > self.max_upload:
                return _error(413, "Request Entity Too Large"), None, None
            if field == "photo" and len(upload.data) > MAX_PHOTO:
                return _error(400, PHOTO_TOO_BIG), None, None
        caption = _caption(params)
        if isinstance(caption, Reply):
            return caption, None, None
        plain, keyboard = caption
        if upload is not None:
            file = self._stored_upload(field, upload)
        assert file is not None
        body: dict[str, Any] = {}
        if field == "photo":
            body["photo"] = self._photo_sizes(file.file_id)
        elif field == "voice":
            body["voice"] = {
                "duration": _int(params.get("duration"), 0), "mime_type": file.mime_type,
                "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                "file_size": file.file_size,
            }  # fmt: skip
        else:
            body["document"] = {
                "file_name": file.file_name, "mime_type": file.mime_type,
                "file_id": file.file_id, "file_unique_id": file.file_unique_id,
                "file_size": file.file_size,
            }  # fmt: skip
        if plain:
            body["caption"] = plain
        message = self._bot_message(params, chat, body, keyboard)
        return _ok(copy_json(message)), file, upload

    def _stored_upload(self, field: str, upload: Part) -> _File:
        """An upload kept as a file of the fake, where Telegram would put it (holding the
        lock): a photo becomes a JPEG, a voice an OGG unless it says it is other audio."""
        n = next(self._file_numbers)
        name = upload.filename or field
        given = upload.mime_type if upload.mime_type != "application/octet-stream" else None
        if field == "photo":
            path, mime, prefix = f"photos/file_{n}.jpg", "image/jpeg", "AgACAgIAAxkBAAI"
        elif field == "voice":
            mime = given if given and given.startswith("audio/") else "audio/ogg"
            path, prefix = f"voice/file_{n}.oga", "AwACAgIAAxkBAAI"
        else:
            mime = given or mimetypes.guess_type(name)[0] or "application/octet-stream"
            ext = posixpath.splitext(name)[1]
            ext = ext if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", ext) else ""
            path, prefix = f"documents/file_{n}{ext}", "BQACAgIAAxkBAAI"
        file = _File(
            file_id=f"{prefix}{n:08d}", file_unique_id=f"AgAD{n:08d}", content=upload.data,
            file_path=path, file_size=len(upload.data), file_name=name, mime_type=mime,
        )  # fmt: skip
        self._files[file.file_id] = file
        self._file_paths[path] = file
        return file

    def _edit_message_text(self, params: dict[str, Any]) -> Reply:
        chat = _chat_key(params.get("chat_id"))
        with self._cond:
            reply = self._check_edit(params, chat)
            if reply.status == 200:
                assert isinstance(reply.body, dict)
                self._edits.append({
                    "chat_id": chat, "message_id": reply.body["result"]["message_id"],
                    "text": params.get("text"), "parse_mode": params.get("parse_mode"),
                    "reply_markup": params.get("reply_markup"), "at": time.monotonic(),
                })  # fmt: skip
            self._cond.notify_all()
            return reply

    def _check_edit(self, params: dict[str, Any], chat: int | str | None) -> Reply:
        """The answer to an editMessageText (holding the lock): the bot's message in that
        chat takes the new text and keyboard (none given: none kept), unless they are
        what it shows already."""
        refusal = self._chat_refusal("editmessagetext", chat)
        if refusal is not None:
            return refusal
        message_id = _int(params.get("message_id"))
        if message_id is None:
            return _error(400, "Bad Request: message identifier is not specified")
        content = _content(params, EDIT_TOO_LONG)
        if isinstance(content, Reply):
            return content
        message = self._messages.get(message_id)
        if message is None or message["chat"]["id"] != chat:
            return _error(400, EDIT_NOT_FOUND)
        if message["from"]["id"] != BOT_ID:
            return _error(400, CANT_EDIT)
        if "text" not in message:  # a file's message: its caption is not its text
            return _error(400, NO_TEXT_TO_EDIT)
        now = (message["text"], message.get("reply_markup"), self._sources.get(message_id))
        if (content.plain, content.keyboard, content.source) == now:
            return _error(400, NOT_MODIFIED)
        message["text"] = content.plain
        message["edit_date"] = int(time.time())
        message.pop("reply_markup", None)
        if content.keyboard is not None:
            message["reply_markup"] = content.keyboard
        self._sources[message_id] = content.source
        return _ok(copy_json(message))

    def _answer_callback_query(self, params: dict[str, Any]) -> Reply:
        """answerCallbackQuery (holding the lock): once per press, as Telegram takes it."""
        query_id = str(params.get("callback_query_id") or "")
        query = self._queries.get(query_id)
        if query is None or query["answered"]:
            return _error(400, QUERY_GONE)
        query["answered"] = True
        self._answered.append({
            "callback_query_id": query_id, "update_id": query["update_id"],
            "data": query["data"], "text": params.get("text"),
            "show_alert": _bool(params.get("show_alert", False)), "at": time.monotonic(),
        })  # fmt: skip
        self._cond.notify_all()
        return _ok(True)

    def _send_chat_action(self, params: dict[str, Any]) -> Reply:
        chat = _chat_key(params.get("chat_id"))
        action = str(params.get("action", ""))
        with self._cond:
            refusal = self._chat_refusal("sendchataction", chat)
            if refusal is not None:
                return refusal
            if action not in CHAT_ACTIONS:
                return _error(400, "Bad Request: wrong parameter action in request")
            self._actions.append({
                "chat_id": chat, "action": action,
                "message_thread_id": _int(params.get("message_thread_id")),
                "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
            return _ok(True)

    def _download(self, request: TrackedHandler, raw: bytes, token: str, path: str) -> Reply:
        with self._cond:
            if self._revoked or token != self.token:
                return _error(401, "Unauthorized")
            file = self._file_paths.get(path)
            if file is None:
                return _error(404, "Not Found")
            self._downloads.append(path)
            self._cond.notify_all()
            return Reply(200, file.content, content_type=file.mime_type)

    def _refuse(self, record: dict[str, Any], reply: Reply) -> None:
        """Record a send refused (under the lock): the request, and Telegram's answer."""
        assert isinstance(reply.body, dict)
        refused = {**record, "error_code": reply.status, "description": reply.body["description"]}
        if "parameters" in reply.body:
            refused["parameters"] = reply.body["parameters"]
        self._refused.append(refused)

    def _control_error(self, status: int, exc: Exception | None) -> Reply:
        return _error(status, "Not Found" if exc is None else f"Bad Request: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.telegram",
        description="A fake Telegram Bot API: prints its base URL, serves until killed.",
    )
    parser.add_argument("--token", default="123456:TEST-token", help="the bot token it accepts")
    args = parser.parse_args()
    serve_until_killed(FakeTelegram(token=args.token))


if __name__ == "__main__":
    main()
