"""A fake Twilio on 127.0.0.1 for the tests of the SMS adapter, from Twilio's Programmable
Messaging documentation (the Message resource, the Media subresource, webhooks and their
security, status callbacks, error codes):

The REST API, HTTP Basic as `AccountSid:AuthToken` or `ApiKeySid:ApiKeySecret`:

    GET  /2010-04-01/Accounts/{AccountSid}.json
        -> {"sid", "friendly_name", "status": "active", "type": "Full"}
    POST /2010-04-01/Accounts/{AccountSid}/Messages.json   (form) To, From or
        MessagingServiceSid, Body, MediaUrl (repeatable), StatusCallback
        -> 201 {"sid": "SM...", "status": "queued", "to", "from", "body",
            "num_segments", "num_media", ...}, recorded in `sent`
    GET  /2010-04-01/Accounts/{AccountSid}/Messages/{MessageSid}/Media/{MediaSid}
        -> 307 to `/signed/{MediaSid}?Expires=...` (the file, no credentials needed),
        as Twilio redirects to its storage; every fetch recorded in `media_fetches`

Errors are Twilio's: `{"code", "message", "more_info", "status"}`. Wrong credentials:
401, 20003 ("Authenticate"). A To not in E.164: 400, 21211; a From that is not the
account's number and no MessagingServiceSid: 400, 21606; a Body over 1,600 characters:
400, 21617; neither Body nor MediaUrl: 400, 21602. `fail(status, code, retry_after=None,
times=1)` answers the next send(s) so (429 20429, 400 21610 an opted-out recipient, 500
20500 ...). `revoke()`: the credentials stop working.

After a send is taken, from a thread: each MediaUrl is fetched as Twilio does (recorded in
`fetched`, with the bytes), then the StatusCallback gets `delivered`, or `failed` /
`undelivered` with the ErrorCode `fail_delivery(to, code, status)` set for that number
(each attempt in `callbacks`; one not answered 2xx is tried again as a delivery is).

The driver (Twilio's side toward hermes): `message()` POSTs an incoming message's form
(MessageSid, AccountSid, From, To, Body, NumMedia, MediaUrl{N}, MediaContentType{N}, ...)
to `webhook_url`, signed (`X-Twilio-Signature`) over `public_url`, as the user typed it in
the Console, while it is delivered to `webhook_url`: the fake plays the reverse proxy, and
any URL hermes gives under `public_url` (a StatusCallback, a MediaUrl) is fetched at the
same place under `webhook_url`. The signature is over the URL verbatim, its fragment of
connection overrides included. `forge=` signs wrongly: "token" (another auth token),
"url" (over another URL), "none" (no header). A request is tried again as Twilio does:
one that did not connect once; with connection overrides in its URL (`#rc=5&rp=all`),
up to `rc` more times after any failure `rp` names; a forgery once;
`deliver_again(sid)` delivers a message once more. Every attempt is in `deliveries`.

Where it differs from Twilio: one account and number; statuses skip queued/sent; no
rate limit of its own (inject them with `fail`); no opt-out list (hermes must never
answer STOP: the tests check it). In its own process: `python -m tests.fakes.twilio`
prints its URL; `POST /_fake/<control>` and `GET /_fake/state` drive it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import re
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx

from tests.fakes.kit import Fake, observed, serve_until_killed
from tests.fakes.local_http import Reply, TrackedHandler, routes

ACCOUNT_SID = "AC0f1e2d3c4b5a69788796a5b4c3d2e1f0"
AUTH_TOKEN = "fake0twilio0auth0token0123456789"
API_KEY_SID = "SK0a1b2c3d4e5f60718293a4b5c6d7e8f9"
API_KEY_SECRET = "fake-twilio-api-key-secret"
NUMBER = "+15005550006"  # hermes's Twilio number
# As typed in the Console, with the connection overrides docs/platforms/sms.md asks for:
# a delivery not answered 2xx is tried again (rc: up to 5 more times; rp: whatever failed).
PUBLIC_URL = "https://hermes.example.test/webhooks/sms#rc=5&rp=all"
PLAIN_URL = PUBLIC_URL.partition("#")[0]  # without them: a 5xx is never tried again
RETRIED = {"ct": "error", "rt": "error", "4xx": 4, "5xx": 5}  # rp's values, a failure's
MAX_BODY = 1600
E164 = re.compile(r"\+[1-9][0-9]{1,14}")
ERRORS = {
    20003: "Authenticate",
    20429: "Too Many Requests",
    20500: "Internal Server Error",
    21211: "Invalid 'To' Phone Number",
    21602: "Message body is required",
    21606: "The 'From' phone number provided is not a valid message-capable Twilio phone"
    " number for this destination/account",
    21610: "Attempt to send to unsubscribed recipient",
    21617: "The concatenated message body exceeds the 1600 character limit",
}


def _error(status: int, code: int, headers: list[tuple[str, str]] | None = None) -> Reply:
    body = {"code": code, "message": ERRORS.get(code, "error"), "status": status,
            "more_info": f"https://www.twilio.com/docs/errors/{code}"}  # fmt: skip
    return Reply(status, body, headers or [])


def signature(url: str, params: list[tuple[str, str]], token: str) -> str:
    """X-Twilio-Signature: base64 HMAC-SHA1 under the auth token of the URL and each
    parameter's name and value, sorted by name."""
    signed = url + "".join(name + value for name, value in sorted(params))
    return base64.b64encode(
        hmac.new(token.encode(), signed.encode(), hashlib.sha1).digest()
    ).decode()


def _overrides(url: str) -> dict[str, str]:
    """The connection overrides in `url`'s fragment (`#rc=3&rp=5xx,rt`)."""
    return dict(parse_qsl(urlsplit(url).fragment))


def _tries(url: str) -> int:
    """How many times Twilio tries a request to `url`: once, and `rc` more (unset: 1)."""
    return 1 + min(int(_overrides(url).get("rc", "1")), 5)


def _retried(url: str, answer: dict[str, Any]) -> bool:
    """Whether Twilio tries again after `answer` (a status code, or a connection error):
    as `rp` says (`all`, or some of `ct`, `rt`, `4xx`, `5xx`); unset, only a request that
    did not connect (`ct`)."""
    code = answer.get("status_code", 0)
    if 200 <= code < 300:
        return False
    failure = "error" if "error" in answer else code // 100
    policy = _overrides(url).get("rp", "ct").split(",")
    return "all" in policy or any(RETRIED.get(p) == failure for p in policy)


def _segments(body: str) -> int:
    """Segments Twilio bills: 160 GSM-7 characters alone, else 153 each; 70 UCS-2 alone,
    else 67 each (this fake takes ASCII for GSM-7)."""
    single, each = (160, 153) if body.isascii() else (70, 67)
    return 1 if len(body) <= single else -(-len(body) // each)


class FakeTwilio(Fake):
    name = "twilio"
    _CONTROLS = frozenset({"configure", "message"})
    _STATE = ("sent", "deliveries", "callbacks", "refused", "internal_errors", "webhook_url")
    _channel_field = "to"
    _ROUTES = routes(
        ("GET", "/2010-04-01/Accounts/{account}.json", "_account"),
        ("POST", "/2010-04-01/Accounts/{account}/Messages.json", "_create"),
        ("GET", "/2010-04-01/Accounts/{account}/Messages/{message}/Media/{media}", "_media"),
        ("GET", "/signed/{media}", "_signed"),
    )

    def __init__(self, token: str = AUTH_TOKEN, port: int = 0) -> None:
        super().__init__(port)
        self.token = token  # the auth token the account has (and signs with)
        self.webhook_url: str | None = None
        self.public_url = PUBLIC_URL
        self.retry_initial = 0.2
        self._revoked = False
        self._numbers = itertools.count(1)
        self._stored: dict[str, tuple[bytes, str]] = {}  # media sid -> bytes, type
        self._media_fetches: list[dict[str, Any]] = []
        self._fetched: list[dict[str, Any]] = []  # MediaUrls hermes gave, as fetched
        self._failing: dict[str, tuple[str, int]] = {}  # a number -> status, error code
        self._deliveries: list[dict[str, Any]] = []
        self._callbacks: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []  # API calls answered with an error
        self._forms: dict[str, dict[str, str]] = {}  # MessageSid -> its form, for again
        self._lanes: dict[str, threading.Lock] = {}
        self.account_reads = 0
        self._client = httpx.Client(timeout=30.0)

    def _stop(self) -> None:
        super()._stop()
        self._client.close()

    sent = observed("_sent", "Messages hermes sent, in order.")
    refused = observed("_refused", "API calls answered with an error (path, status).")
    deliveries = observed("_deliveries", "Every attempt to deliver to hermes.")
    callbacks = observed("_callbacks", "Status callbacks posted to hermes, with its answer.")
    media_fetches = observed("_media_fetches", "Fetches of incoming messages' media.")
    fetched = observed("_fetched", "MediaUrls hermes gave, fetched: url, status, content.")

    # -- controls ----------------------------------------------------------------------

    def configure(self, **values: Any) -> None:
        """Set `webhook_url`, `public_url`, `retry_initial`."""
        self._change(**values)

    def fail(self, status: int, code: int, *, retry_after: float | None = None,
             times: int = 1) -> None:  # fmt: skip
        """The next `times` sends are answered `status` with Twilio's `code`."""
        with self._cond:
            self._faults.add((status, code, retry_after), "send", times=times)

    def fail_delivery(self, to: str, code: int = 30003, status: str = "failed") -> None:
        """Sends to `to` are taken, then their status callback says `status` with `code`."""
        self._change(_failing={**self._failing, to: (status, code)})

    def revoke(self) -> None:
        """The auth token (and the API key) stop working."""
        self._change(_revoked=True)

    # -- the REST API --------------------------------------------------------------------

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        reply = super()._handle(request, raw)
        if reply is not None and reply.status >= 400:
            with self._cond:
                path = urlsplit(request.path).path
                self._refused.append({"path": path, "status": reply.status, "at": time.monotonic()})
                self._cond.notify_all()
        return reply

    def _authorized(self, request: TrackedHandler, account: str) -> bool:
        auth = str(request.headers.get("authorization", ""))
        try:
            user, _, password = (
                base64.b64decode(auth.removeprefix("Basic ")).decode().partition(":")
            )
        except ValueError:
            return False
        right = {(ACCOUNT_SID, self.token), (API_KEY_SID, API_KEY_SECRET)}
        return account == ACCOUNT_SID and not self._revoked and (user, password) in right

    def _account(self, request: TrackedHandler, raw: bytes, account: str) -> Reply:
        if not self._authorized(request, account):
            return _error(401, 20003)
        with self._cond:
            self.account_reads += 1
            self._cond.notify_all()
        return Reply(200, {"sid": ACCOUNT_SID, "friendly_name": "hermes test account",
                           "status": "active", "type": "Full"})  # fmt: skip

    def _create(self, request: TrackedHandler, raw: bytes, account: str) -> Reply:
        if not self._authorized(request, account):
            return _error(401, 20003)
        pairs = parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
        form = dict(pairs)
        media = [value for name, value in pairs if name == "MediaUrl"]
        with self._cond:
            fault = self._faults.take("send")
        if fault is not None:
            status, code, wait = fault
            return _error(status, code, [] if wait is None else [("Retry-After", f"{wait:g}")])
        to, body = form.get("To", ""), form.get("Body", "")
        sender = form.get("From") if "MessagingServiceSid" not in form else NUMBER
        if not E164.fullmatch(to):
            return _error(400, 21211)
        if sender != NUMBER:
            return _error(400, 21606)
        if len(body) > MAX_BODY:
            return _error(400, 21617)
        if not body and not media:
            return _error(400, 21602)
        with self._cond:
            sid = f"SM{next(self._numbers):032x}"
            record = {"sid": sid, "to": to, "from": NUMBER, "body": body, "media_urls": media,
                      "status_callback": form.get("StatusCallback"),
                      "messaging_service_sid": form.get("MessagingServiceSid"),
                      "at": time.monotonic()}  # fmt: skip
            self._sent.append(record)
            self._cond.notify_all()
        threading.Thread(target=self._after, args=(record,), daemon=True).start()
        answer = {"sid": sid, "account_sid": ACCOUNT_SID, "status": "queued", "to": to,
                  "from": NUMBER, "body": body, "num_segments": str(_segments(body)),
                  "num_media": str(len(media)), "direction": "outbound-api",
                  "uri": f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json"}  # fmt: skip
        return Reply(201, answer)

    def _media(self, request: TrackedHandler, raw: bytes, account: str, message: str,
               media: str) -> Reply:  # fmt: skip
        allowed = self._authorized(request, account)
        with self._cond:
            self._media_fetches.append({"media": media, "message": message,
                                        "authorized": allowed})  # fmt: skip
            self._cond.notify_all()
            known = media in self._stored
        if not allowed:
            return _error(401, 20003)
        if not known:
            return _error(404, 20404)
        signed = f"{self.url}/signed/{media}?Expires={int(time.time()) + 300}"
        return Reply(307, b"", [("location", signed)], "text/plain")

    def _signed(self, request: TrackedHandler, raw: bytes, media: str) -> Reply:
        if "authorization" in request.headers:  # storage takes no Twilio credentials
            return Reply(400, b"<Error>InvalidArgument</Error>", [], "application/xml")
        with self._cond:
            stored = self._stored.get(media)
        if stored is None:
            return Reply(404, b"<Error>NoSuchKey</Error>", [], "application/xml")
        return Reply(200, stored[0], [], stored[1])

    # -- after a send: its media fetched, its status posted --------------------------------

    def _local(self, url: str) -> str:
        """A URL under the public one, as the reverse proxy passes it on to hermes."""
        url, plain = url.partition("#")[0], self.public_url.partition("#")[0]
        if self.webhook_url and url.startswith(plain):
            return self.webhook_url + url[len(plain) :]
        return url

    def _after(self, record: dict[str, Any]) -> None:
        for url in record["media_urls"]:
            try:
                got = self._client.get(self._local(url))
                fetched = {"url": url, "status": got.status_code, "content": got.content,
                           "content_type": got.headers.get("content-type")}  # fmt: skip
            except httpx.HTTPError as exc:
                fetched = {"url": url, "status": 0, "error": type(exc).__name__}
            with self._cond:
                self._fetched.append(fetched)
                self._cond.notify_all()
        callback = record["status_callback"]
        if not callback:
            return
        with self._cond:
            status, code = self._failing.get(record["to"], ("delivered", 0))
        form = {"AccountSid": ACCOUNT_SID, "MessageSid": record["sid"], "SmsSid": record["sid"],
                "MessageStatus": status, "SmsStatus": status, "To": record["to"],
                "From": NUMBER, "ApiVersion": "2010-04-01"}  # fmt: skip
        if code:
            form["ErrorCode"] = str(code)
        wait = self.retry_initial
        for attempt in range(1, _tries(callback) + 1):  # as a delivery is tried again
            answer = self._post(callback, form, None)
            with self._cond:
                self._callbacks.append({"sid": record["sid"], "status": status,
                                        "attempt": attempt, **answer})  # fmt: skip
                self._cond.notify_all()
                if not _retried(callback, answer):
                    return
                self._cond.wait_for(lambda: self._closing, wait)
            wait *= 2

    def _post(self, public: str, form: dict[str, str], forge: str | None) -> dict[str, Any]:
        """POST `form` to hermes as Twilio signs it for `public`: the status code, or the
        error."""
        url = {"url": public.replace("hermes.", "other.", 1)}.get(forge or "", public)
        token = "forged" if forge == "token" else self.token
        headers = {"content-type": "application/x-www-form-urlencoded"}
        if forge != "none":
            headers["x-twilio-signature"] = signature(url, list(form.items()), token)
        try:
            response = self._client.post(self._local(public), content=urlencode(form),
                                         headers=headers)  # fmt: skip
        except httpx.HTTPError as exc:
            return {"error": type(exc).__name__}
        return {"status_code": response.status_code, "content_type":
                response.headers.get("content-type"), "body": response.text}  # fmt: skip

    # -- the driver ------------------------------------------------------------------------

    def message(self, text: str = "", sender: str = "+15551230001", *,
                media: list[tuple[bytes | str, str]] | None = None, forge: str | None = None,
                sid: str | None = None) -> str:  # fmt: skip
        """An incoming message from `sender` to hermes's number, delivered (see the
        module); `media` as (the bytes, or their base64, type) pairs. Its MessageSid."""
        kind = "MM" if media else "SM"
        sid = sid or f"{kind}{next(self._numbers) + 10**9:032x}"
        form = {"ToCountry": "US", "SmsMessageSid": sid, "NumMedia": str(len(media or ())),
                "SmsSid": sid, "SmsStatus": "received", "Body": text, "To": NUMBER,
                "NumSegments": str(_segments(text)), "MessageSid": sid,
                "AccountSid": ACCOUNT_SID, "From": sender, "ApiVersion": "2010-04-01"}  # fmt: skip
        for n, (data, mime) in enumerate(media or ()):
            media_sid = f"ME{next(self._numbers):032x}"
            with self._cond:
                self._stored[media_sid] = (
                    base64.b64decode(data) if isinstance(data, str) else data,
                    mime,
                )
            form[f"MediaUrl{n}"] = (f"{self.url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/"
                                    f"{sid}/Media/{media_sid}")  # fmt: skip
            form[f"MediaContentType{n}"] = mime
        self.deliver(form, forge)
        return sid

    def deliver(self, form: dict[str, str], forge: str | None = None) -> None:
        """POST an incoming message's `form` to hermes from a thread (one sender's in
        order), tried again until a 2xx (a forgery once)."""
        with self._cond:
            self._forms[form["MessageSid"]] = dict(form)
            lock = self._lanes.setdefault(form.get("From", ""), threading.Lock())
        threading.Thread(target=self._deliver, args=(dict(form), forge, lock),
                         daemon=True).start()  # fmt: skip

    def form(self, sid: str) -> dict[str, str]:
        """The form of a message the driver made."""
        with self._cond:
            return dict(self._forms[sid])

    def deliver_again(self, sid: str) -> None:
        """The same message once more (a delivery Twilio could not confirm)."""
        self.deliver(self.form(sid))

    def _deliver(self, form: dict[str, str], forge: str | None, lock: threading.Lock) -> None:
        with lock:
            wait = self.retry_initial
            for attempt in range(1, (1 if forge else _tries(self.public_url)) + 1):
                with self._cond:
                    self._cond.wait_for(lambda: self.webhook_url or self._closing)
                    if self._closing:
                        return
                record = {"id": form["MessageSid"], "attempt": attempt,
                          **self._post(self.public_url, form, forge)}  # fmt: skip
                with self._cond:
                    record["at"] = time.monotonic()
                    self._deliveries.append(record)
                    self._cond.notify_all()
                    if not _retried(self.public_url, record):
                        return
                    self._cond.wait_for(lambda: self._closing, wait)
                wait *= 2

    def wait_delivered(self, sid: str, timeout: float = 30.0) -> dict[str, Any]:
        """The 2xx attempt of a message's delivery, once there is one."""
        [done] = self._wait_records("_deliveries", 1, timeout, f"{sid} delivered",
                                    lambda d: d["id"] == sid
                                    and 200 <= d.get("status_code", 0) < 300)  # fmt: skip
        return done

    def wait_attempts(self, sid: str, count: int = 1, timeout: float = 30.0) -> list:
        """The delivery attempts of a message, once there are `count`."""
        return self._wait_records("_deliveries", count, timeout, f"{count} tries of {sid}",
                                  lambda d: d["id"] == sid)  # fmt: skip

    def wait_callbacks(self, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        return self._wait_records("_callbacks", count, timeout, f"{count} status callback(s)")

    def wait_fetched(self, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        return self._wait_records("_fetched", count, timeout, f"{count} MediaUrl fetch(es)")

    def _internal_error(self) -> Reply:
        return _error(500, 20500)


if __name__ == "__main__":
    serve_until_killed(FakeTwilio())
