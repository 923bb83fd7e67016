"""A fake WhatsApp Business Cloud API on 127.0.0.1, playing Meta's side for the tests of
the WhatsApp adapter and its webhook listener: the Graph API's send and media endpoints
on one port, and a driver that POSTs signed webhook deliveries to hermes, retries them
on anything but a 2xx, sends status callbacks and enforces the 24-hour window.

Graph API, under any `/v<major>.<minor>/` (an unknown path answers 400, code 2500):

    POST /{version}/{phone_number_id}/messages   Authorization: Bearer <token>
        {"messaging_product": "whatsapp", "to": "<wa_id>", "type": "text",
         "text": {"body": "...", "preview_url": false}, "context": {"message_id": ...}?}
        {"messaging_product": "whatsapp", "to": ..., "type": "template", "template":
         {"name": ..., "language": {"code": "en_US"}, "components": [{"type": "body",
          "parameters": [{"type": "text", "text": "..."}]}]}}
        {"messaging_product": "whatsapp", "to": ..., "type": "image" | "audio" | "document"
         | "video", "<type>": {"id": "<media id>", "caption"?: ..., "filename"?: ...}}
        -> {"messaging_product": "whatsapp", "contacts": [{"input": <to>, "wa_id": <wa_id>}],
            "messages": [{"id": "wamid...."}]}  (a template's also "message_status":
            "accepted"); any other `type` (sticker, reaction, interactive, media by `link`
            ...) is taken as given and recorded with its object
        {"messaging_product": "whatsapp", "status": "read", "message_id": "<wamid>",
         "typing_indicator": {"type": "text"}?}  -> {"success": true}; recorded in
            `reads`; a wamid the driver never delivered answers 400, code 100
    POST /{version}/{phone_number_id}/media   Authorization: Bearer <token>
        multipart/form-data: `file` (the bytes, with a filename), `type` (its MIME type;
        without it, the file part's Content-Type), `messaging_product=whatsapp`
        -> {"id": "<media id>"}: kept for messages to refer to (see Media sends)
    GET /{version}/{phone_number_id}?fields=...   Authorization: Bearer <token>
        -> {"id", "display_phone_number", "verified_name", "quality_rating"} (those asked)
    GET /{version}/{media_id}   Authorization: Bearer <token>
        -> {"messaging_product": "whatsapp", "url": "<this fake>/media/<id>?mid=...",
            "mime_type", "sha256" (hex), "file_size" (a string, as Meta's example), "id"}
    GET /media/<id>?...   Authorization: Bearer <token>  -> the bytes (401 without it)

Errors are Meta's Graph errors, with the HTTP status Meta's table gives:
`{"error": {"message": "(#<code>) <title>", "type": "OAuthException", "code": <code>,
"error_subcode"?, "error_data": {"messaging_product": "whatsapp", "details": "..."},
"fbtrace_id": "..."}}`. A missing or wrong token answers 401, code 190 ("Invalid OAuth
access token - Cannot parse access token"); after `revoke_token()` every call does
(code 190, subcode 463, the session expired). A text body over 4,096 characters answers
400, code 100 (Invalid parameter). A template the fake does not know answers 400, code
132001, when the fake was given its `templates` (by default every name is taken).
`fail(130429)` / `fail(131056, status=429)` answer the next send(s) with a rate error;
`fail_upload(code)` the next upload(s). `lose_answer("messages" | "media")`: the next
call there that succeeds is taken (the send recorded, the upload kept) and its answer is
lost (the connection closes without one), as when a request reached Meta and nothing
came back.

Media sends, as the Cloud API takes them: an upload is refused over the limit of the
type it declares (image/jpeg, image/png and other images 5 MB; image/webp, a sticker,
500 KB; audio/* and video/* 16 MB; anything else, a document, 100 MB; MB = 1024 * 1024
bytes) with 400, code 100, "(#100) Invalid parameter", details "File Too Large: The file
you uploaded is too large." (Meta's answer), and is not kept. A message of type image,
audio, document or video refers to a media id this fake issued: another id answers 400,
code 100, "(#100) Param <type>.id is not a valid whatsapp business account media
attachment ID" (Meta's words); neither an id nor a `link`, 400 code 100; a caption on
audio (Meta: captions are not for audio), 400 code 100 (the fake's choice). A message
whose type does not fit its media's type (an image message needs image/jpeg or
image/png, audio audio/*, video video/*; a document takes any) is accepted and then
gets a `failed` status with 131053 ("Media upload error"), as Meta reports a mismatched
type. Each such message taken is recorded in `uploads` too (its media's bytes when at
most 1 MiB; always their size and sha256); every upload kept in `uploaded`.

The 24-hour window, as Meta enforces it: the fake knows when each user last wrote (every
inbound message the driver delivers sets it from its `timestamp`; `silent_for()` and
`set_last_inbound()` set it too). A free-form (non-template) send to a user outside 24
hours (or who never wrote) is accepted (200, a wamid) and then gets a `failed` status
callback with error 131047 ("Re-engagement message"); a template goes out whatever the
window. `fail_next_send(wa_id, 131026)` makes the next accepted send to a user fail the
same way with that code.

Status callbacks: each accepted send gets `sent` then `delivered` (a reaction: `sent`
only), unless `status_callbacks` is off; `user_reads(wamid)` sends `read`. Each is a
`statuses` webhook: `id` (the wamid), `status`, `timestamp`, `recipient_id`, `pricing`
(sent / delivered / read), and for `failed` `errors: [{code, title, message,
error_data: {details}, href}]`.

The driver (the fake's client side, toward hermes's listener at `webhook_url`):
`deliver_text`, `deliver_reply`, `deliver_interactive`, `deliver_reaction`,
`deliver_media`, `deliver_message` build Meta's payload (`object:
whatsapp_business_account`, `entry[].changes[].value` with `messaging_product`,
`metadata`, `contacts`, `messages`, `field: messages`), serialise it as Meta does
(compact, non-ASCII as \\uXXXX and "/" as "\\/": a receiver that re-serialises the
parsed JSON computes another signature), sign the raw bytes into `X-Hub-Signature-256:
sha256=<hex HMAC-SHA256 under app_secret>` and POST them from background threads: one
user's deliveries one at a time, in the order queued, different users' in parallel (a
delivery waiting for its retry does not hold the next one back, as with Meta). A non-2xx
answer or a connection failure is retried after `retry_initial` seconds, doubling up to
`retry_cap`, `retry_max_tries` tries in all (Meta retries for days; the fake's schedule
is short and configurable); a delivery waits, not failing, while `webhook_url` is unset.
Every attempt is recorded in `deliveries` (`id`: the wamid of a message, `<wamid>/<status>`
of a status callback; `attempt`; `status_code` or `error`). A delivery with
`bad_signature=True` is signed with another secret and tried once (a forger does not
retry). `verify()` performs the GET subscription handshake against `webhook_url`.

The test drives the fake from its own thread (every method is thread-safe) and waits
with the `wait_*` helpers, which block on a condition (no sleeping) and raise
TimeoutError naming what they waited for. The fake keeps its state for its whole life,
across restarts of hermes, as Meta does. `close()` returns at once.

Where the fake knowingly differs from Meta: one phone number; no throughput or pair-rate
limits of its own (inject them with `fail`); media URLs do not expire; the `details` of a
refused mark-as-read and of a too-long text are the fake's words; uploaded media ids do
not expire and are for messages only (`GET /{media_id}` of one is not served).

In its own process:

    python -m tests.fakes.whatsapp [--token T] [--app-secret S] [--verify-token V]

prints its base URL on one line and serves until killed. Another process drives it over
HTTP: `POST {url}/_fake/<name>` with a JSON object of keyword arguments calls one of the
`_CONTROLS` (answer `{"ok": true, "result": <return value>}`), and `GET {url}/_fake/state`
answers the records.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx

from tests.fakes.kit import Fake, observed, serve_until_killed
from tests.fakes.local_http import (
    BodyError,
    Reply,
    TrackedHandler,
    bearer,
    copy_json,
    decode_object,
    form_parts,
    match,
    query,
    routes,
)

TOKEN = "EAAG-fake-whatsapp-token"
APP_SECRET = "fake-whatsapp-app-secret"
VERIFY_TOKEN = "fake-whatsapp-verify-token"
PHONE_NUMBER_ID = "106540352242922"
DISPLAY_PHONE_NUMBER = "15550783881"
WABA_ID = "102290129340398"
SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_TEXT = 4096  # characters of a text message's body
WINDOW = 24 * 3600.0  # the customer-service window, in seconds
ERROR_CODES_URL = "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
MEDIA_KINDS = frozenset({"image", "audio", "voice", "document", "video", "sticker"})
SENT_MEDIA = frozenset({"image", "audio", "document", "video"})  # sent by a media id
MB = 1024 * 1024
KEPT_UPLOAD = MB  # an upload up to this keeps its bytes (`content`)
TOO_LARGE = "File Too Large: The file you uploaded is too large."
STATUSES = ("sent", "delivered", "read", "failed")
_VERSION = re.compile(r"v\d+\.\d+")
_BODY_ERRORS = {
    "not_json": "The request body is not valid JSON.",
    "not_object": "The request body must be a JSON object.",
}


@attrs.frozen
class MetaError:
    """One of Meta's error codes: its title (the `message` of a status callback's error,
    and of a Graph error after "(#code) "), its details and the HTTP status of a Graph
    answer carrying it."""

    code: int
    title: str
    details: str
    http_status: int = 400


ERRORS: dict[int, MetaError] = {e.code: e for e in (
    MetaError(1, "An unknown error has occurred.", "", 500),
    MetaError(100, "Invalid parameter", "Invalid parameter"),
    MetaError(190, "Invalid OAuth access token - Cannot parse access token", "", 401),
    MetaError(2500, "Unknown path components", ""),
    MetaError(130429, "Rate limit hit", "Message failed to send because there were too many"
              " messages sent from this phone number in a short period of time"),
    MetaError(131000, "Something went wrong", "Message failed to send due to an unknown error.",
              500),
    MetaError(131026, "Message undeliverable", "Unable to deliver message. Reasons can include:"
              " The recipient phone number is not a WhatsApp phone number."),
    MetaError(131047, "Re-engagement message", "Message failed to send because more than 24"
              " hours have passed since the customer last replied to this number."),
    MetaError(131048, "Spam rate limit hit", "Message failed to send because there are"
              " restrictions on how many messages can be sent from this phone number."),
    MetaError(131049, "This message was not delivered to maintain healthy ecosystem engagement.",
              "In order to maintain a healthy ecosystem engagement, the message failed to be"
              " delivered."),
    MetaError(131056, "(Business Account, Consumer Account) pair rate limit hit", "Too many"
              " messages sent from the sender phone number to the same recipient phone number"
              " in a short period of time."),
    MetaError(131053, "Media upload error", "Unable to upload the media used in the message."),
    MetaError(132001, "Template name does not exist in the translation",
              "template name does not exist in the translation"),
)}  # fmt: skip
RATE_CODES = frozenset({130429, 131056})


def meta_error(code: int) -> MetaError:
    """The error `code` as Meta describes it (a code the fake does not know: a generic one)."""
    return ERRORS.get(code) or MetaError(code, f"Error {code}", f"Error {code}")


def sign(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature-256` of `body` under the app secret `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def serialise(payload: Any) -> bytes:
    """A payload as Meta puts it on the wire: compact, non-ASCII escaped, "/" as "\\/"."""
    return (
        json.dumps(payload, separators=(",", ":"), ensure_ascii=True).replace("/", "\\/").encode()
    )


def _fbtrace() -> str:
    return "A" + secrets.token_urlsafe(16)


def graph_error(
    code: int,
    details: str | None = None,
    *,
    status: int | None = None,
    subcode: int | None = None,
    message: str | None = None,
) -> Reply:
    """A Graph API error answer for `code` (Meta's status, title and details unless given)."""
    known = meta_error(code)
    error: dict[str, Any] = {
        "message": message or (known.title if code in (1, 190) else f"(#{code}) {known.title}"),
        "type": "OAuthException", "code": code,
    }  # fmt: skip
    if subcode is not None:
        error["error_subcode"] = subcode
    details = known.details if details is None else details
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    error["fbtrace_id"] = _fbtrace()
    return Reply(status or known.http_status, {"error": error})


def status_error(code: int, details: str | None = None) -> dict[str, Any]:
    """An entry of a `failed` status callback's `errors`."""
    known = meta_error(code)
    return {
        "code": code, "title": known.title, "message": known.title,
        "error_data": {"details": known.details if details is None else details},
        "href": ERROR_CODES_URL,
    }  # fmt: skip


def wa_id_of(to: str) -> str:
    """The WhatsApp id a `to` reaches: its digits ("+1 650-555-1234" -> "16505551234")."""
    return re.sub(r"\D", "", to)


def _base_type(mime: str) -> str:
    return mime.split(";", 1)[0].strip().lower()


def upload_limit(mime: str) -> int:
    """The largest file an upload declaring `mime` may carry (the module docstring)."""
    base = _base_type(mime)
    if base == "image/webp":
        return 500 * 1024
    if base.startswith("image/"):
        return 5 * MB
    if base.startswith(("audio/", "video/")):
        return 16 * MB
    return 100 * MB


def _fits(kind: str, mime: str) -> bool:
    """Whether a message of type `kind` can show media of type `mime`."""
    base = _base_type(mime)
    if kind == "image":
        return base in ("image/jpeg", "image/png")
    return kind == "document" or base.startswith(f"{kind}/")


@attrs.frozen
class _Media:
    media_id: str
    data: bytes
    mime_type: str
    filename: str | None
    file_size: int

    @property
    def sha256_hex(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def sha256_b64(self) -> str:  # webhooks carry the hash in base64
        return base64.b64encode(hashlib.sha256(self.data).digest()).decode()


@attrs.frozen
class _Upload:
    """A file the business uploaded: its bytes only when at most KEPT_UPLOAD."""

    media_id: str
    filename: str | None
    mime: str
    size: int
    sha256: str
    content: bytes | None

    def info(self) -> dict[str, Any]:
        return {"media_id": self.media_id, "filename": self.filename, "mime": self.mime,
                "size": self.size, "sha256": self.sha256}  # fmt: skip


@attrs.define(eq=False)
class _Delivery:
    """One webhook POST and its retries."""

    key: str  # the wamid of a message, "<wamid>/<status>" of a status callback
    wamid: str
    kind: str  # "message", a status ("sent", ...), or "payload"
    lane: str  # deliveries of one lane (a user) go one at a time, in order
    body: bytes
    signature: str
    tries: int | None  # None: the fake's retry_max_tries at the time
    seq: int
    signed: bool = True  # False: signed with another secret
    attempts: int = 0
    next_at: float = 0.0
    state: str = "pending"  # pending | in_flight | acknowledged | gave_up
    status_codes: list[int | None] = attrs.Factory(list)

    def info(self) -> dict[str, Any]:
        return {
            "id": self.key, "wamid": self.wamid, "kind": self.kind, "state": self.state,
            "attempts": self.attempts, "status_codes": list(self.status_codes),
            "payload": json.loads(self.body),
        }  # fmt: skip


class FakeWhatsApp(Fake):
    """WhatsApp's Cloud API (the Graph API's messages and media) and its webhooks, as the
    module's docstring tells."""

    name = "WhatsApp"
    _ROUTES = routes(
        ("GET", "/media/{media_id}", "_download"),
        ("POST", "/{version}/{phone_number_id}/messages", "_messages"),
        ("POST", "/{version}/{phone_number_id}/media", "_upload"),
        ("GET", "/{version}/{object_id}", "_object"),
    )
    _channel_field = "to"
    _CONTROLS = frozenset({
        "deliver_text", "deliver_reply", "deliver_interactive", "deliver_reaction",
        "deliver_media", "deliver_message", "user_reads", "set_last_inbound", "silent_for",
        "add_media", "fail", "fail_upload", "fail_next_send", "lose_answer", "clear_faults",
        "revoke_token", "configure", "delivery",
    })  # fmt: skip
    _STATE = (
        "sent", "refused", "reads", "deliveries", "pending", "gave_up", "downloads",
        "media_lookups", "number_lookups", "rate_limited", "verifications", "webhook_url",
        "internal_errors", "uploads", "uploaded",
    )  # fmt: skip

    def __init__(
        self,
        *,
        token: str = TOKEN,
        app_secret: str = APP_SECRET,
        verify_token: str = VERIFY_TOKEN,
        phone_number_id: str = PHONE_NUMBER_ID,
        display_phone_number: str = DISPLAY_PHONE_NUMBER,
        waba_id: str = WABA_ID,
        webhook_url: str | None = None,
        status_callbacks: bool = True,
        retry_initial: float = 0.2,
        retry_cap: float = 2.0,
        retry_max_tries: int = 30,
        delivery_timeout: float = 10.0,
        workers: int = 4,
        templates: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        port: int = 0,
    ) -> None:
        """`templates` (name -> language code): the approved templates (None: any name is
        taken); `clock`: wall-clock seconds, for message timestamps and the window;
        `port` 0 picks a free one."""
        super().__init__(port)
        self.token = token
        self.app_secret = app_secret
        self.verify_token = verify_token
        self.phone_number_id = phone_number_id
        self.display_phone_number = display_phone_number
        self.waba_id = waba_id
        self.webhook_url = webhook_url
        self.status_callbacks = status_callbacks
        self.retry_initial = retry_initial
        self.retry_cap = retry_cap
        self.retry_max_tries = retry_max_tries
        self.delivery_timeout = delivery_timeout
        self.templates = None if templates is None else dict(templates)
        self.clock = clock
        self._revoked = False
        self._numbers = itertools.count(1)
        self._last_inbound: dict[str, float] = {}  # wa_id -> when the user last wrote
        self._inbound: dict[str, str] = {}  # wamid of each message delivered -> its wa_id
        self._outbound: dict[str, dict[str, Any]] = {}  # wamid -> its record in `_sent`
        self._refused: list[dict[str, Any]] = []
        self._reads: list[dict[str, Any]] = []
        self._media: dict[str, _Media] = {}
        self._uploaded: dict[str, _Upload] = {}  # by media id, in order of upload
        self._uploads: list[dict[str, Any]] = []
        self._downloads: list[str] = []
        self._media_lookups: list[str] = []
        self._number_lookups = 0  # GET /{phone-number-id} answered (a token that reads it)
        self._verifications: list[dict[str, Any]] = []
        # the driver
        self._deliveries: dict[str, _Delivery] = {}  # by key, every one ever queued
        self._unsettled: list[_Delivery] = []  # pending or in flight, in order of queueing
        self._attempts: list[dict[str, Any]] = []
        self._gave_up: list[str] = []
        self._workers = [
            threading.Thread(target=self._work, name=f"whatsapp-driver-{n}", daemon=True)
            for n in range(max(1, workers))
        ]

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> FakeWhatsApp:
        super().__enter__()
        for worker in self._workers:
            worker.start()
        return self

    def close(self) -> None:
        """Stop serving and delivering: connections are shut at once, nothing waited for."""
        self._stop()

    def _stop(self) -> None:
        super()._stop()
        for worker in self._workers:
            if worker.is_alive():
                worker.join(0.5)

    @property
    def graph_url(self) -> str:
        """`{url}/v21.0`: the base URL of the Graph API (any version is served)."""
        return f"{self.url}/v21.0"

    def configure(
        self,
        *,
        webhook_url: str | None = None,
        app_secret: str | None = None,
        verify_token: str | None = None,
        status_callbacks: bool | None = None,
        retry_initial: float | None = None,
        retry_cap: float | None = None,
        retry_max_tries: int | None = None,
    ) -> None:
        """Change settings (those not given stay); they apply to what happens next. (Setting
        `webhook_url` directly wakes no delivery waiting for one: use this.)"""
        with self._cond:
            for name, value in (
                ("webhook_url", webhook_url), ("app_secret", app_secret),
                ("verify_token", verify_token), ("status_callbacks", status_callbacks),
                ("retry_initial", retry_initial), ("retry_cap", retry_cap),
                ("retry_max_tries", retry_max_tries),
            ):  # fmt: skip
                if value is not None:
                    setattr(self, name, value)
            self._cond.notify_all()

    # -- the window, faults, media ---------------------------------------------------------

    def set_last_inbound(self, wa_id: str, at: float | None) -> None:
        """The user `wa_id` last wrote at `at` (wall-clock seconds; None: never)."""
        with self._cond:
            if at is None:
                self._last_inbound.pop(wa_id, None)
            else:
                self._last_inbound[wa_id] = float(at)
            self._cond.notify_all()

    def silent_for(self, wa_id: str, seconds: float) -> None:
        """The user `wa_id` last wrote `seconds` ago (25 * 3600: outside the window)."""
        self.set_last_inbound(wa_id, self.clock() - seconds)

    def last_inbound(self, wa_id: str) -> float | None:
        with self._cond:
            return self._last_inbound.get(wa_id)

    def window_open(self, wa_id: str) -> bool:
        """Whether a free-form message to `wa_id` would be delivered now."""
        with self._cond:
            return self._window_open(wa_id, self.clock())

    def fail(
        self,
        code: int = 130429,
        *,
        status: int | None = None,
        to: str | None = None,
        details: str | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` sends (to `to` if given) answer Meta's error `code` (130429
        throughput, 131056 pair rate, 190 auth ...) with HTTP `status` (default Meta's
        for the code) and `details`. Mark-as-read calls are not sends. Faults queue."""
        reply = graph_error(code, details, status=status)
        with self._cond:
            self._faults.add(reply, "messages", None if to is None else wa_id_of(to), times)

    def fail_next_send(
        self, wa_id: str, code: int = 131026, *, details: str | None = None, times: int = 1
    ) -> None:
        """The next `times` sends to `wa_id` are accepted (200, a wamid) and then get a
        `failed` status callback with error `code` (131026: undeliverable)."""
        with self._cond:
            self._faults.add((code, details), "status", wa_id_of(wa_id), times)

    def fail_upload(
        self,
        code: int = 131000,
        *,
        status: int | None = None,
        details: str | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` uploads answer Meta's error `code` (with HTTP `status`, default
        Meta's for the code) and keep nothing."""
        with self._cond:
            self._faults.add(graph_error(code, details, status=status), "media", None, times)

    def lose_answer(self, route: str = "messages", times: int = 1) -> None:
        """The next `times` calls to `route` ("messages": a send, a mark-as-read aside;
        "media": an upload) that succeed are taken, and their answer is lost: the
        connection closes without one."""
        if route not in ("messages", "media"):
            raise ValueError(f"route must be messages or media, not {route!r}")
        with self._cond:
            self._faults.add(True, f"lose:{route}", None, times)

    def revoke_token(self) -> None:
        """Every Graph call and media download from now on answers 401, code 190."""
        self._change(_revoked=True)

    def add_media(
        self,
        data: bytes,
        mime_type: str = "application/octet-stream",
        *,
        filename: str | None = None,
        size: int | None = None,
    ) -> str:
        """Media a user sent, kept on Meta's side; returns its media id. `size` is the
        `file_size` the metadata reports (default the data's): a 100 MB file without
        storing 100 MB. The download serves `data` (text over the remote control)."""
        if isinstance(data, str):  # over the remote control
            data = data.encode()
        with self._cond:
            media_id = self._new_media_id()
            self._media[media_id] = _Media(
                media_id, bytes(data), mime_type, filename, len(data) if size is None else size
            )
            return media_id

    # -- the driver: inbound messages ------------------------------------------------------

    def deliver_text(
        self,
        wa_id: str,
        text: str,
        *,
        name: str = "Ann",
        timestamp: float | None = None,
        bad_signature: bool = False,
    ) -> str:
        """The user `wa_id` (profile name `name`) writes `text`: a webhook delivery,
        queued at once; returns the message's wamid."""
        return self.deliver_message(wa_id, {"type": "text", "text": {"body": text}}, name=name,
                                    timestamp=timestamp, bad_signature=bad_signature)  # fmt: skip

    def deliver_reply(
        self,
        wa_id: str,
        text: str,
        reply_to: str,
        *,
        name: str = "Ann",
        timestamp: float | None = None,
        bad_signature: bool = False,
    ) -> str:
        """The user replies with `text` to the message `reply_to` (a wamid: the business's
        when the fake sent it, else the user's own): `context: {from, id}`."""
        message = {"type": "text", "text": {"body": text}, "context": self._context(reply_to)}
        return self.deliver_message(wa_id, message, name=name, timestamp=timestamp,
                                    bad_signature=bad_signature)  # fmt: skip

    def deliver_interactive(
        self,
        wa_id: str,
        reply_id: str,
        title: str,
        *,
        kind: str = "button_reply",
        description: str | None = None,
        context: str | None = None,
        name: str = "Ann",
        timestamp: float | None = None,
    ) -> str:
        """The user taps a reply button (`kind` "button_reply") or picks a list row
        ("list_reply", with its `description`) with id `reply_id` and label `title`, of
        the business's message `context` (a wamid) if given."""
        if kind not in ("button_reply", "list_reply"):
            raise ValueError(f"kind must be button_reply or list_reply, not {kind!r}")
        reply: dict[str, Any] = {"id": reply_id, "title": title}
        if kind == "list_reply" and description is not None:
            reply["description"] = description
        message: dict[str, Any] = {"type": "interactive",
                                   "interactive": {"type": kind, kind: reply}}  # fmt: skip
        if context is not None:
            message["context"] = self._context(context)
        return self.deliver_message(wa_id, message, name=name, timestamp=timestamp)

    def deliver_reaction(
        self,
        wa_id: str,
        message_id: str,
        emoji: str | None,
        *,
        name: str = "Ann",
        timestamp: float | None = None,
    ) -> str:
        """The user reacts with `emoji` to the message `message_id` (None: removes their
        reaction, which Meta sends without the emoji field)."""
        reaction: dict[str, Any] = {"message_id": message_id}
        if emoji is not None:
            reaction["emoji"] = emoji
        return self.deliver_message(wa_id, {"type": "reaction", "reaction": reaction}, name=name,
                                    timestamp=timestamp)  # fmt: skip

    def deliver_media(
        self,
        wa_id: str,
        kind: str,
        media_id: str,
        caption: str | None = None,
        *,
        name: str = "Ann",
        timestamp: float | None = None,
    ) -> str:
        """The user sends the media `media_id` (from `add_media`) as `kind`: image, audio,
        voice (an audio with `voice: true`), document (with its filename), video or
        sticker; `caption` for an image, a document or a video."""
        if kind not in MEDIA_KINDS:
            raise ValueError(f"kind must be one of {sorted(MEDIA_KINDS)}, not {kind!r}")
        with self._cond:
            media = self._media.get(media_id)
        if media is None:
            raise LookupError(f"no media {media_id!r}: add_media() it first")
        wire = "audio" if kind == "voice" else kind
        obj: dict[str, Any] = {}
        if caption is not None and wire in ("image", "document", "video"):
            obj["caption"] = caption
        if wire == "document":
            obj["filename"] = media.filename or f"{media_id}.bin"
        obj.update({"mime_type": media.mime_type, "sha256": media.sha256_b64, "id": media_id})
        if wire == "audio":
            obj["voice"] = kind == "voice"
        if wire == "sticker":
            obj["animated"] = False
        return self.deliver_message(wa_id, {"type": wire, wire: obj}, name=name,
                                    timestamp=timestamp)  # fmt: skip

    def deliver_message(
        self,
        wa_id: str,
        message: dict[str, Any],
        *,
        name: str = "Ann",
        timestamp: float | None = None,
        bad_signature: bool = False,
    ) -> str:
        """Any message object (its `type` and that type's object; `from`, `id` and
        `timestamp` are filled in unless given) from the user `wa_id`, in a delivery of its
        own; returns its wamid. The user's window reopens from its timestamp."""
        with self._cond:
            at = self.clock() if timestamp is None else float(timestamp)
            wamid = str(message.get("id") or self._new_wamid(wa_id))
            msg = {"from": wa_id, "id": wamid, "timestamp": str(int(at)), **message}
            msg["id"], msg["from"] = wamid, message.get("from", wa_id)
            value = {
                "messaging_product": "whatsapp", "metadata": self._metadata(),
                "contacts": [{"profile": {"name": name}, "wa_id": wa_id}], "messages": [msg],
            }  # fmt: skip
            self._inbound[wamid] = wa_id
            self._last_inbound[wa_id] = max(self._last_inbound.get(wa_id, at), at)
            self._enqueue(wamid, wamid, "message", wa_id, self._envelope(value),
                          bad_signature=bad_signature)  # fmt: skip
            return wamid

    def deliver_payload(
        self,
        payload: dict[str, Any],
        *,
        key: str | None = None,
        lane: str = "",
        bad_signature: bool = False,
    ) -> str:
        """Any payload, as given (two messages in one delivery, an `errors` webhook ...),
        signed and delivered like the others; returns its key (default "payload-<n>").
        It changes no window: use `set_last_inbound`."""
        with self._cond:
            key = key or f"payload-{next(self._numbers)}"
            self._enqueue(key, key, "payload", lane or key, payload, bad_signature=bad_signature)
            return key

    def user_reads(self, wamid: str) -> str:
        """The user reads the business's message `wamid`: a `read` status callback (sent
        whatever `status_callbacks` says); returns its delivery's key."""
        with self._cond:
            record = self._outbound.get(wamid)
            if record is None:
                raise LookupError(f"no message {wamid!r} was sent")
            if record["error_code"] is not None:
                raise ValueError(f"message {wamid!r} failed ({record['error_code']}): unread")
            return self._status(record, "read")

    def verify(
        self,
        mode: str = "subscribe",
        token: str | None = None,
        challenge: str = "1158201444",
        *,
        timeout: float = 10.0,
    ) -> tuple[int, str]:
        """The subscription handshake Meta performs when the webhook URL is set: a GET of
        `webhook_url` with `hub.mode`, `hub.challenge` and `hub.verify_token` (default the
        fake's); returns the answer's (status, body). Meta takes it when that is (200,
        challenge). Blocks: call it from a thread in a trio test."""
        with self._cond:
            url, token = self.webhook_url, self.verify_token if token is None else token
        if not url:
            raise ValueError("no webhook_url to verify: configure(webhook_url=...) first")
        params = {"hub.mode": mode, "hub.challenge": challenge, "hub.verify_token": token}
        answer = httpx.get(url, params=params, timeout=timeout)
        with self._cond:
            self._verifications.append({
                "mode": mode, "token": token, "challenge": challenge,
                "status_code": answer.status_code, "body": answer.text,
                "verified": answer.status_code == 200 and answer.text == challenge,
            })  # fmt: skip
            self._cond.notify_all()
        return answer.status_code, answer.text

    # -- observing ---------------------------------------------------------------------------

    sent = observed("_sent", """The sends taken (200 and a wamid), in order: `kind` ("text",
        "template" or the message type), `to` (the wa_id), `input` (the `to` as given),
        `wamid`, `text` and `preview_url` (a text's, else None), `template`, `language` and
        `parameters` (the texts of the body component's parameters; a template's, else
        None / []), `reply_to` (the `context.message_id`, or None), `body` (the request),
        `window_open`, `error_code` (of the `failed` status it got, else None), `at`
        (time.monotonic() of arrival).""")  # fmt: skip
    refused = observed("_refused", """Sends answered with an error, in order: `to`, `kind`,
        `code`, `status_code`, `details`, `body`, `at`.""")  # fmt: skip
    reads = observed("_reads", """Mark-as-read calls taken: `message_id`, `wa_id`,
        `typing_indicator` (bool), `at`.""")  # fmt: skip
    rate_limited = observed(
        "_refused",
        "Sends answered with a rate error (130429, 131056).",
        lambda refused: sum(r["code"] in RATE_CODES for r in refused),
    )
    deliveries = observed("_attempts", """Every webhook POST attempt, in order: `id` (the
        wamid of a message, `<wamid>/<status>` of a status callback), `wamid`, `kind`
        ("message", "sent", "delivered", "read", "failed", "payload"), `attempt` (1, 2,
        ...), `status_code` (None: no answer), `error` (the connection failure, or None),
        `signed` (False: a bad signature), `at`.""")  # fmt: skip
    pending = observed("_unsettled", "Keys of the deliveries not settled yet.",
                       lambda unsettled: [d.key for d in unsettled])  # fmt: skip
    gave_up = observed("_gave_up", "Keys of the deliveries whose tries ran out.")
    uploads = observed("_uploads", """The media messages taken (image, audio, document,
        video by a media id), in order: `to`, `wamid`, `type`, `media_id`, `filename` (a
        document's, else the upload's), `mime` (the upload's type), `size`, `sha256`
        (hex), `caption` (or None), `content` (the bytes when at most 1 MiB, else None),
        `error_code` (of the `failed` status it got, else None), `at`.""")  # fmt: skip
    uploaded = observed("_uploaded", """Every upload kept, in order: `media_id`, `filename`,
        `mime`, `size`, `sha256`.""", lambda kept: [u.info() for u in kept.values()])  # fmt: skip
    downloads = observed("_downloads", "The media ids whose bytes were downloaded, in order.")
    media_lookups = observed("_media_lookups", "The media ids looked up (GET /{version}/{id}).")
    number_lookups = observed("_number_lookups", "How many times the number was read.")
    verifications = observed("_verifications", """Each `verify()`: `mode`, `token`,
        `challenge`, `status_code`, `body`, `verified`.""")  # fmt: skip

    def delivery(self, key: str) -> dict[str, Any]:
        """A delivery as it stands: `id`, `wamid`, `kind`, `state` ("pending", "in_flight",
        "acknowledged": a 2xx, "gave_up"), `attempts`, `status_codes`, `payload`."""
        with self._cond:
            return self._deliveries[key].info()

    def statuses_of(self, wamid: str) -> list[str]:
        """The status callbacks queued for the business's message `wamid`, in order."""
        with self._cond:
            return [d.kind for d in self._deliveries.values()
                    if d.wamid == wamid and d.kind in STATUSES]  # fmt: skip

    def sent_to(self, to: str) -> list[dict[str, Any]]:
        """The sends taken to one user (`to` as a wa_id or a phone number)."""
        return super().sent_to(wa_id_of(to))

    def wait_sent(
        self, count: int = 1, timeout: float = 10.0, *, to: str | None = None
    ) -> list[dict[str, Any]]:
        """The sends taken (to `to` if given), once at least `count` were."""
        return super().wait_sent(count, timeout, channel=None if to is None else wa_id_of(to))

    def wait_refused(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The refused sends, once at least `count` were."""
        return self._wait_records("_refused", count, timeout, f"{count} refused send(s)")

    def wait_uploads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The media messages taken (`uploads`), once at least `count` were."""
        return self._wait_records("_uploads", count, timeout, f"{count} media message(s)")

    def wait_reads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The mark-as-read calls, once at least `count` came."""
        return self._wait_records("_reads", count, timeout, f"{count} mark-as-read call(s)")

    def wait_attempts(
        self, count: int = 1, timeout: float = 10.0, *, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The delivery attempts (of `key` if given), once at least `count` were made."""
        of = "" if key is None else f" of {key}"
        return self._wait_records("_attempts", count, timeout, f"{count} delivery attempt(s){of}",
                                  lambda a: key in (None, a["id"]))  # fmt: skip

    def wait_settled(self, key: str, timeout: float = 10.0) -> dict[str, Any]:
        """The delivery `key` once acknowledged (2xx) or given up on."""

        def settled() -> bool:
            found = self._deliveries.get(key)
            return found is not None and found.state in ("acknowledged", "gave_up")

        self._wait(settled, timeout, f"delivery {key} settled")
        return self.delivery(key)

    def wait_delivered(
        self, wamid: str, status: str | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        """The delivery of the user's message `wamid` (or, with `status`, of that status
        callback for the business's message `wamid`) once a 2xx acknowledged it;
        AssertionError if its tries ran out first."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
        key = wamid if status is None else f"{wamid}/{status}"
        found = self.wait_settled(key, timeout)
        if found["state"] != "acknowledged":
            raise AssertionError(f"delivery {key} gave up after {found['status_codes']}")
        return found

    # -- internals (called holding the lock) -------------------------------------------------

    def _new_media_id(self) -> str:
        return str(1013859600285440 + next(self._numbers))

    def _new_wamid(self, wa_id: str) -> str:
        raw = f"\x15\x02\x00\x12{wa_id}\x18\x14{next(self._numbers):020X}{secrets.token_hex(4)}"
        return "wamid." + base64.b64encode(raw.encode()).decode()

    def _metadata(self) -> dict[str, str]:
        return {"display_phone_number": self.display_phone_number,
                "phone_number_id": self.phone_number_id}  # fmt: skip

    def _envelope(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"object": "whatsapp_business_account", "entry": [{
            "id": self.waba_id, "changes": [{"value": value, "field": "messages"}],
        }]}  # fmt: skip

    def _context(self, wamid: str) -> dict[str, str]:
        """The `context` of a reply to `wamid`: `from` is who sent it."""
        sender = self._inbound.get(wamid, self.display_phone_number)
        return {"from": sender, "id": wamid}

    def _window_open(self, wa_id: str, now: float) -> bool:
        last = self._last_inbound.get(wa_id)
        return last is not None and now - last < WINDOW

    def _enqueue(
        self,
        key: str,
        wamid: str,
        kind: str,
        lane: str,
        payload: dict[str, Any],
        *,
        bad_signature: bool = False,
    ) -> None:
        if key in self._deliveries:
            raise ValueError(f"a delivery {key!r} exists already")
        body = serialise(payload)
        secret = "not-" + self.app_secret if bad_signature else self.app_secret
        delivery = _Delivery(
            key, wamid, kind, lane, body, sign(body, secret), 1 if bad_signature else None,
            next(self._numbers), signed=not bad_signature, next_at=time.monotonic(),
        )  # fmt: skip
        self._deliveries[key] = delivery
        self._unsettled.append(delivery)
        self._cond.notify_all()

    def _status(self, record: dict[str, Any], status: str, errors: list | None = None) -> str:
        """Queue the status callback `status` of the business's message `record`."""
        entry: dict[str, Any] = {
            "id": record["wamid"], "status": status, "timestamp": str(int(self.clock())),
            "recipient_id": record["to"],
        }  # fmt: skip
        if status != "failed":
            template = record["kind"] == "template"
            entry["pricing"] = {
                "billable": template, "pricing_model": "PMP",
                "type": "regular" if template else "free_customer_service",
                "category": "utility" if template else "service",
            }  # fmt: skip
        if errors:
            entry["errors"] = errors
        value = {"messaging_product": "whatsapp", "metadata": self._metadata(),
                 "statuses": [entry]}  # fmt: skip
        key = f"{record['wamid']}/{status}"
        self._enqueue(key, record["wamid"], status, record["to"], self._envelope(value))
        return key

    # -- the driver's workers ------------------------------------------------------------------

    def _work(self) -> None:
        with httpx.Client(timeout=self.delivery_timeout) as client:
            while True:
                with self._cond:
                    job, url = self._take_due()
                if job is None:
                    return
                try:
                    code, error = self._post(client, url, job)
                    with self._cond:
                        self._settle(job, code, error)
                except Exception:  # a bug of the fake: record, keep delivering
                    self._record_internal_error(traceback.format_exc())

    def _take_due(self) -> tuple[_Delivery | None, str]:
        """The next delivery due, marked in flight (waiting for one; None: closing)."""
        while not self._closing:
            now = time.monotonic()
            timeout: float | None = None
            if self.webhook_url:
                busy = {d.lane for d in self._unsettled if d.state == "in_flight"}
                waiting = [d for d in self._unsettled
                           if d.state == "pending" and d.lane not in busy]  # fmt: skip
                due = [d for d in waiting if d.next_at <= now]
                if due:
                    job = min(due, key=lambda d: (d.next_at, d.seq))
                    job.state, job.attempts = "in_flight", job.attempts + 1
                    return job, self.webhook_url
                if waiting:
                    timeout = max(0.0, min(d.next_at for d in waiting) - now)
            self._cond.wait(timeout)
        return None, ""

    def _post(
        self, client: httpx.Client, url: str, job: _Delivery
    ) -> tuple[int | None, str | None]:
        headers = {
            "content-type": "application/json", SIGNATURE_HEADER: job.signature,
            "user-agent": "facebookexternalua",
        }  # fmt: skip
        try:
            return client.post(url, content=job.body, headers=headers).status_code, None
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def _settle(self, job: _Delivery, code: int | None, error: str | None) -> None:
        now = time.monotonic()
        job.status_codes.append(code)
        self._attempts.append({
            "id": job.key, "wamid": job.wamid, "kind": job.kind, "attempt": job.attempts,
            "status_code": code, "error": error, "signed": job.signed, "at": now,
        })  # fmt: skip
        tries = self.retry_max_tries if job.tries is None else job.tries
        if code is not None and 200 <= code < 300:
            job.state = "acknowledged"
            self._unsettled.remove(job)
        elif job.attempts >= tries or self._closing:
            job.state = "gave_up"
            self._gave_up.append(job.key)
            self._unsettled.remove(job)
        else:
            job.state = "pending"
            job.next_at = now + min(self.retry_cap, self.retry_initial * 2 ** (job.attempts - 1))
        self._cond.notify_all()

    # -- serving (handler threads) --------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return graph_error(1)

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        """A download (its own token check), else a call of the Graph API: a version,
        the token, then the route."""
        path = urlsplit(request.path).path
        found = match(self._ROUTES, request.command, path)
        token = bearer(request.headers)
        token = query(request.path).get("access_token", "") if token is None else token
        if isinstance(found, tuple) and found[0] == "_download":
            return self._download(found[1]["media_id"], token)
        segments = [s for s in path.split("/") if s]
        if not segments or not _VERSION.fullmatch(segments[0]):
            return graph_error(2500, message=f"Unknown path components: {path}")
        refusal = self._auth_refusal(token)
        if refusal is not None:
            return refusal
        if isinstance(found, int):
            unknown = "/" + "/".join(segments[1:])
            return graph_error(2500, message=f"Unknown path components: {unknown}")
        handler, params = found
        return getattr(self, handler)(request, raw, **params)

    def _auth_refusal(self, token: str) -> Reply | None:
        with self._cond:
            if self._revoked:
                return graph_error(190, subcode=463, message="Error validating access token:"
                                   " Session has expired.")  # fmt: skip
            if not hmac.compare_digest(token.encode(), self.token.encode()):
                return graph_error(190)
        return None

    def _unsupported(self, verb: str, object_id: str) -> Reply:
        return graph_error(100, "", subcode=33, message=(
            f"Unsupported {verb} request. Object with ID '{object_id}' does not exist, cannot"
            " be loaded due to missing permissions, or does not support this operation."
        ))  # fmt: skip

    def _messages(
        self, request: TrackedHandler, raw: bytes, version: str, phone_number_id: str
    ) -> Reply | None:
        if phone_number_id != self.phone_number_id:
            return self._unsupported("post", phone_number_id)
        try:
            body = decode_object("application/json", raw)
        except BodyError as exc:
            return graph_error(100, _BODY_ERRORS[exc.kind])
        if body.get("messaging_product") != "whatsapp":
            return graph_error(100, "The parameter messaging_product is required.")
        if body.get("status") is not None:
            return self._mark_read(body)
        to = str(body.get("to") or "")
        if not wa_id_of(to):
            return graph_error(100, "The parameter to is required.")
        with self._cond:
            reply = self._check_send(body, wa_id_of(to))
            if reply.status != 200:
                error = reply.body["error"]
                self._refused.append({
                    "to": wa_id_of(to), "kind": str(body.get("type", "text")),
                    "code": error["code"], "status_code": reply.status,
                    "details": error.get("error_data", {}).get("details"), "body": body,
                    "at": time.monotonic(),
                })  # fmt: skip
            self._cond.notify_all()
            if reply.status == 200 and self._faults.take("lose:messages") is not None:
                return None
            return reply

    def _check_send(self, body: dict[str, Any], wa_id: str) -> Reply:
        """The answer to a send (holding the lock); one taken is recorded, its status
        callbacks queued."""
        fault = self._faults.take("messages", wa_id)
        if fault is not None:
            return fault
        kind = str(body.get("type", "text"))
        record: dict[str, Any] = {
            "kind": kind, "to": wa_id, "input": str(body["to"]), "text": None,
            "preview_url": None, "template": None, "language": None, "parameters": [],
            "reply_to": (body.get("context") or {}).get("message_id"), "body": copy_json(body),
        }  # fmt: skip
        if kind == "text":
            text = body.get("text") if isinstance(body.get("text"), dict) else {}
            text_body = text.get("body")
            if not isinstance(text_body, str) or not text_body:
                return graph_error(100, "The parameter text['body'] is required.")
            if len(text_body) > MAX_TEXT:
                return graph_error(100, f"Param text['body'] must be at most {MAX_TEXT}"
                                   " characters long.")  # fmt: skip
            record["text"], record["preview_url"] = text_body, bool(text.get("preview_url", False))
        elif kind == "template":
            refusal = self._read_template(body.get("template"), record)
            if refusal is not None:
                return refusal
        elif not isinstance(body.get(kind), dict):
            return graph_error(100, f"The parameter {kind} is required.")
        upload = None
        if kind in SENT_MEDIA:
            found = self._media_of(kind, body[kind])
            if isinstance(found, Reply):
                return found
            upload = found
        now = self.clock()
        record["window_open"] = self._window_open(wa_id, now)
        failure: tuple[int, str | None] | None = None
        if kind != "template" and not record["window_open"]:
            failure = (131047, None)
        elif upload is not None and not _fits(kind, upload.mime):
            failure = (131053, f"A media of type {upload.mime} cannot be sent as {kind}.")
        else:
            failure = self._faults.take("status", wa_id)
        record["wamid"] = self._new_wamid(wa_id)
        record["error_code"] = None if failure is None else failure[0]
        record["at"] = time.monotonic()
        self._sent.append(record)
        self._outbound[record["wamid"]] = record
        if upload is not None:
            media = body[kind]
            named = media.get("filename") if kind == "document" else None
            self._uploads.append({
                "to": wa_id, "wamid": record["wamid"], "type": kind, "media_id": upload.media_id,
                "filename": named or upload.filename, "mime": upload.mime, "size": upload.size,
                "sha256": upload.sha256, "caption": media.get("caption"),
                "content": upload.content, "error_code": record["error_code"], "at": record["at"],
            })  # fmt: skip
        if failure is not None:
            self._status(record, "failed", [status_error(*failure)])
        elif self.status_callbacks:
            self._status(record, "sent")
            if kind != "reaction":  # Meta: a reaction gets `sent` only
                self._status(record, "delivered")
        message: dict[str, Any] = {"id": record["wamid"]}
        if kind == "template":
            message["message_status"] = "accepted"
        return Reply(200, {
            "messaging_product": "whatsapp",
            "contacts": [{"input": record["input"], "wa_id": wa_id}], "messages": [message],
        })  # fmt: skip

    def _media_of(self, kind: str, media: dict[str, Any]) -> _Upload | Reply | None:
        """The upload a media message refers to (None: by `link`, taken as given), or the
        refusal of the message (holding the lock)."""
        if kind == "audio" and media.get("caption") is not None:
            return graph_error(100, "Param audio.caption is not allowed: audio takes no caption.")
        if media.get("id") is None:
            if media.get("link"):
                return None
            return graph_error(100, "", message="(#100) Either one of media ID or link must be"
                               " present")  # fmt: skip
        found = self._uploaded.get(str(media["id"]))
        if found is None:
            return graph_error(100, "", message=f"(#100) Param {kind}.id is not a valid whatsapp"
                               " business account media attachment ID")  # fmt: skip
        return found

    def _upload(
        self, request: TrackedHandler, raw: bytes, version: str, phone_number_id: str
    ) -> Reply | None:
        """`POST /{phone_number_id}/media`: the file kept, its media id answered."""
        if phone_number_id != self.phone_number_id:
            return self._unsupported("post", phone_number_id)
        try:
            parts = form_parts(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            return graph_error(100, f"The request body must be multipart/form-data: {exc}.")
        fields = {p.name: p.text() for p in parts if p.filename is None}
        if fields.get("messaging_product") != "whatsapp":
            return graph_error(100, "The parameter messaging_product is required.")
        part = next((p for p in reversed(parts) if p.name == "file" and p.filename), None)
        if part is None:
            return graph_error(100, "The parameter file is required.")
        mime = fields.get("type") or part.content_type
        if not mime:
            return graph_error(100, "The parameter type is required.")
        with self._cond:
            fault = self._faults.take("media")
            if fault is not None:
                return fault
            if len(part.data) > upload_limit(mime):
                return graph_error(100, TOO_LARGE)
            media_id = self._new_media_id()
            self._uploaded[media_id] = _Upload(
                media_id, part.filename, mime, len(part.data),
                hashlib.sha256(part.data).hexdigest(),
                part.data if len(part.data) <= KEPT_UPLOAD else None,
            )  # fmt: skip
            self._cond.notify_all()
            if self._faults.take("lose:media") is not None:
                return None
        return Reply(200, {"id": media_id})

    def _read_template(self, template: Any, record: dict[str, Any]) -> Reply | None:
        if not isinstance(template, dict) or not template.get("name"):
            return graph_error(100, "The parameter template['name'] is required.")
        name = str(template["name"])
        language = (template.get("language") or {}).get("code")
        if not language:
            return graph_error(100, "The parameter template['language']['code'] is required.")
        if self.templates is not None and self.templates.get(name) != language:
            return graph_error(132001, f"template name ({name}) does not exist in {language}")
        parameters = []
        for component in template.get("components") or []:
            if isinstance(component, dict) and component.get("type") == "body":
                parameters += [p.get("text") for p in component.get("parameters") or []
                               if isinstance(p, dict) and p.get("type") == "text"]  # fmt: skip
        record.update(template=name, language=language, parameters=parameters)
        return None

    def _mark_read(self, body: dict[str, Any]) -> Reply:
        if body.get("status") != "read":
            return graph_error(100, "The parameter status must be read.")
        message_id = str(body.get("message_id") or "")
        indicator = body.get("typing_indicator")
        if indicator is not None and indicator != {"type": "text"}:
            return graph_error(100, "The parameter typing_indicator['type'] must be text.")
        with self._cond:
            wa_id = self._inbound.get(message_id)
            if wa_id is None:
                return graph_error(100, f"Invalid message_id: {message_id!r}")
            self._reads.append({
                "message_id": message_id, "wa_id": wa_id,
                "typing_indicator": indicator is not None, "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
        return Reply(200, {"success": True})

    def _object(self, request: TrackedHandler, raw: bytes, version: str, object_id: str) -> Reply:
        """`GET /{id}`: the business number, or a media's URL."""
        if object_id == self.phone_number_id:
            return self._number(query(request.path))
        return self._media_info(object_id)

    def _number(self, query: dict[str, str]) -> Reply:
        """The business number, as `GET /{phone-number-id}` reads it (the fields asked)."""
        number = {"id": self.phone_number_id, "display_phone_number": self.display_phone_number,
                  "verified_name": "Hermes Test", "quality_rating": "GREEN"}  # fmt: skip
        with self._cond:
            self._number_lookups += 1
            self._cond.notify_all()
        fields = [f for f in query.get("fields", "").split(",") if f]
        return Reply(200, {k: v for k, v in number.items() if not fields or k in fields or
                           k == "id"})  # fmt: skip

    def _media_info(self, media_id: str) -> Reply:
        with self._cond:
            media = self._media.get(media_id)
            if media is None:
                return self._unsupported("get", media_id)
            self._media_lookups.append(media_id)
            self._cond.notify_all()
        digest = hashlib.sha256(f"{media_id}:{self.token}".encode()).hexdigest()[:32]
        expires = int(self.clock()) + 300
        return Reply(200, {
            "messaging_product": "whatsapp",
            "url": f"{self.url}/media/{media_id}?mid={media_id}&ext={expires}&hash={digest}",
            "mime_type": media.mime_type, "sha256": media.sha256_hex,
            "file_size": str(media.file_size), "id": media_id,
        })  # fmt: skip

    def _download(self, media_id: str, token: str) -> Reply:
        with self._cond:
            if self._revoked or not hmac.compare_digest(token.encode(), self.token.encode()):
                return Reply(401, b"Unauthorized", content_type="text/plain")
            media = self._media.get(media_id)
            if media is None:
                return Reply(404, b"Not Found", content_type="text/plain")
            self._downloads.append(media_id)
            self._cond.notify_all()
            return Reply(200, media.data, content_type=media.mime_type)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.whatsapp",
        description="A fake WhatsApp Cloud API: prints its base URL, serves until killed.",
    )
    parser.add_argument("--token", default=TOKEN, help="the access token it accepts")
    parser.add_argument("--app-secret", default=APP_SECRET, help="the secret it signs with")
    parser.add_argument("--verify-token", default=VERIFY_TOKEN, help="for verify()")
    args = parser.parse_args()
    serve_until_killed(FakeWhatsApp(token=args.token, app_secret=args.app_secret,
                                    verify_token=args.verify_token))  # fmt: skip


if __name__ == "__main__":
    main()
