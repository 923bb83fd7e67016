"""The SMS adapter: Twilio's Programmable Messaging, pushed to the webhook listener.

- Inbound: Twilio POSTs each incoming message (a form) to `/webhooks/<name>`. Its
  `X-Twilio-Signature` is checked first, over `public_url` (the URL as Twilio called it,
  behind the reverse proxy; never the Host the request names) and the form: a missing,
  wrong or other URL's signature is a 403 that costs nothing more. A message is admitted
  to the journal under its MessageSid (one delivered again is recognised) before the 200
  and its empty TwiML; one that could not be admitted is a 500, delivered again only
  where the URL's connection overrides (`#rc=5&rp=all`) say so. Opt-out keywords (STOP,
  START, HELP and their synonyms) are Twilio's: answered 200, never a turn.
- Status callbacks (`/webhooks/<name>/status`, signed the same way over that URL): a
  `failed` or `undelivered` send turns its outbox row dead with Twilio's error code; one
  that comes before the send's answer is recorded is held and applied once it is (a 5xx
  would not bring it again: Twilio retries only what its URL's overrides say).
- Nothing to poll: live once the credentials read the account; refused ones are fatal
  to sends only (texts are still admitted, replies wait for fixed credentials).
- Outbound: one message per chunk (`POST /2010-04-01/Accounts/{sid}/Messages.json`, HTTP
  Basic with the auth token or an API key). A file goes as an MMS whose `MediaUrl` Twilio
  fetches from `/webhooks/<name>/media/<token>` (unguessable, expiring) where `media_url`
  is set; else it is refused, saying why. 429 (20429) waits, 401 (20003) is fatal with
  the rows kept, a 400 (21211 an invalid number, 21610 opted out) is dead.
- MMS in: each media fetched from Twilio with the credentials (only once the sender is
  authorized), then from the signed URL Twilio redirects to, without them.
"""

from __future__ import annotations

import base64
import logging
import math
import mimetypes
import secrets
import urllib.parse
from pathlib import Path

import httpx
import trio

from hermes.actors.errors import Unavailable
from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    DeliveryFailed,
    Fetched,
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
    file_gone,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer, failed_send
from hermes.adapters.media import (
    FILE_SECONDS,
    MediaError,
    Saved,
    download,
    refuse_unless_ok,
    save_stream,
)
from hermes.adapters.refusals import Codes, Refusal, retry_after
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.sms.config import SmsConfig
from hermes.adapters.sms.inbound import Ignored, failure_of, message_of
from hermes.adapters.sms.signature import HEADER, proven, signed_urls
from hermes.adapters.url_media import trusted
from hermes.adapters.webhooks import FORBIDDEN, NO_SUCH_WEBHOOK, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

DEFAULT_BASE = "https://api.twilio.com"
API = "/2010-04-01/Accounts"
CODES = Codes(  # Twilio's error codes
    rate_limited=frozenset({"20429", "14107"}),  # too many requests; the send rate
    auth=frozenset({"20003"}),  # authentication failed
    passing=frozenset({"20500", "20503"}),  # Twilio's internal error; unavailable
)
MEDIA_HOSTS = ("twilio.com",)  # where Twilio serves an incoming message's media
MEDIA_SECONDS = 4 * 3600.0  # a file's path on the listener, for Twilio to fetch
REDIRECTS = (301, 302, 303, 307, 308)
TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
OK = WebhookAnswer(200, TWIML, "text/xml")
MAX_HELD = 1000  # failed reports held for sends whose answers are not recorded yet
HELD_SECONDS = 300.0  # how long one is held (a send's answer is recorded in moments)


class SmsAdapter(HttpAdapter[SmsConfig]):
    receives_when_refused = True  # Twilio delivers whatever our key; sends wait for it
    platform = "sms"
    progress_deadline = math.inf  # it is pushed to: nothing it waits on can go deaf
    concurrent_sends = 16

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.token = setup.secrets.get(config.token_env) or ""
        self.base = (config.base_url or DEFAULT_BASE).rstrip("/")
        self.auth = _auth(config, setup.secrets, self.token)
        self.undelivered = setup.undelivered
        self.public = config.public_url or ""  # verbatim: Twilio signs it as typed
        self.shelf: dict[str, tuple[OutFile, float]] = {}  # media token -> file, expiry
        self.held: dict[str, DeliveryFailed] = {}  # reports before their sends' answers

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """The credentials read the account (`GET /2010-04-01/Accounts/{sid}.json`)."""
        config = cls.configured(config)
        token = _required(config, secrets)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            base = (config.base_url or DEFAULT_BASE).rstrip("/")
            return await _account(http, base, config, _auth(config, secrets, token))

    # -- the actor ----------------------------------------------------------------

    async def connect(self) -> None:
        config = self.config
        _required(config, self.secrets)
        for key, value in (
            ("account_sid", config.account_sid),
            ("public_url", config.public_url),
            ("number", config.number or config.messaging_service_sid),
        ):
            if not value:
                raise AdapterFatal(f"set platforms.{self.name}.{key}")
        assert self.http is not None  # opened by on_start
        try:
            account = await _account(self.http, self.base, config, self.auth)
        except AdapterFatal as refused:  # the webhook still proves Twilio's requests
            self.fatal(refused.reason, stop=False)  # texts admitted, replies held
        else:
            sender = config.number or config.messaging_service_sid
            log.info(
                "%s: %s sends as %s; messages come to %s", self.name, account, sender, self.public
            )
            self.progress()
        await trio.sleep_forever()  # live until stopped: messages come to the listener

    # -- receiving ------------------------------------------------------------------

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        if request.path.startswith("media/") and request.method == "GET":
            return await self._media(request.path.removeprefix("media/"))
        if request.path not in ("", "status"):
            return NO_SUCH_WEBHOOK
        if request.method != "POST":
            return WebhookAnswer(405, b"POST\n")
        body = request.body.decode("utf-8", "replace")
        params = urllib.parse.parse_qsl(body, keep_blank_values=True)
        urls = signed_urls(self.public, request.path)
        if not proven(request.headers.get(HEADER), urls, params, self.token):
            log.warning("%s: a request without a valid signature was refused", self.name)
            return FORBIDDEN
        form = dict(params)
        try:
            if request.path == "status":
                failed = failure_of(form, self.platform)
                if failed is not None:
                    await self._undelivered(failed)
            else:
                found = message_of(form, self.platform)
                if isinstance(found, Ignored):
                    log.info("%s: not answered: %s", self.name, found.why)
                else:
                    await self.admit(found)
        except Exception as exc:  # not in: answered 500
            log.error("%s: a request could not be admitted: %r", self.name, exc)
            return WebhookAnswer(500, b"not admitted\n")
        if self.status.state != FATAL:  # messages come; refused credentials stop sends
            self.progress()
        return OK

    async def _undelivered(self, failed: DeliveryFailed) -> None:
        """A send Twilio failed: its row dead now, or, reported before the send's answer
        was recorded, held (by MessageSid) and applied once it is; Twilio does not report
        it again."""
        if self.undelivered is None or failed.message_id in self.held:
            return
        try:
            await self.undelivered(failed)
        except Unavailable:  # its send's answer is not recorded yet
            if len(self.held) >= MAX_HELD:
                raise
            self.held[failed.message_id] = failed
            self.nursery.start_soon(self._apply_held, failed)

    async def _apply_held(self, failed: DeliveryFailed) -> None:
        """A held report, applied once its send's answer is recorded (tried again with a
        growing wait, for up to HELD_SECONDS: a restart meanwhile makes the send unknown)."""
        assert self.undelivered is not None
        wait, until = 0.05, trio.current_time() + HELD_SECONDS
        try:
            while True:
                await trio.sleep(wait)
                try:
                    await self.undelivered(failed)
                    return
                except Unavailable:
                    if trio.current_time() > until:
                        log.error(
                            "%s: %s never recorded: %s", self.name, failed.message_id, failed.reason
                        )
                        return
                wait = min(wait * 2, 2.0)
        finally:
            del self.held[failed.message_id]

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each media of an authorized message, from Twilio with the credentials, then
        from the signed URL it redirects to, without them; streamed to the cache."""
        if self.cache is None or self.http is None:
            return Fetched((), tuple(f"[{self.name} cannot save media here]" for _ in attachments))
        files, problems = [], []
        for n, ref in enumerate(attachments):
            mime, _, url = ref.partition("|")
            try:
                with trio.fail_after(FILE_SECONDS):
                    files.append(await self._download(url, mime))
            except (httpx.HTTPError, MediaError, ValueError, OSError, trio.TooSlowError) as exc:
                problems.append(f"[the media {n + 1} could not be fetched: {exc!r}]")
        return Fetched(tuple(files), tuple(problems))

    async def _download(self, url: str, mime: str) -> Saved:
        assert self.http is not None and self.cache is not None
        if not trusted(url, (*MEDIA_HOSTS, self.base)):
            raise ValueError(f"the media URL's host {httpx.URL(url).host!r} is not Twilio's")
        path = httpx.URL(url).path.rstrip("/")
        name = f"{path.rsplit('/', 1)[-1]}{mimetypes.guess_extension(mime) or ''}"
        request = self.http.build_request("GET", url, headers=self.auth)
        got = await self.http.send(request, stream=True, follow_redirects=False)
        try:
            if got.status_code in REDIRECTS and "location" in got.headers:
                signed = str(httpx.URL(url).join(got.headers["location"]))
            else:
                refuse_unless_ok(got, name, self.media)
                pieces = got.aiter_bytes()
                return await save_stream(self.cache, name, pieces, mime or None, self.media)
        finally:
            await got.aclose()
        if not signed.startswith("https://") and not signed.startswith(self.base):
            raise ValueError("Twilio redirected the media to a URL that is not https")
        return await download(self.http, signed, self.cache, name, mime or None, self.media)

    async def _media(self, token: str) -> WebhookAnswer:
        """A file hermes sent, for Twilio to fetch: unknown or expired paths are 404."""
        now = trio.current_time()
        shelved = self.shelf.get(token)
        if shelved is None or shelved[1] < now:
            return NO_SUCH_WEBHOOK
        file = shelved[0]
        try:
            data = await trio.to_thread.run_sync(Path(file.path).read_bytes)
        except OSError:
            return NO_SUCH_WEBHOOK
        return WebhookAnswer(200, data, file.mime)

    # -- sending --------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        """A message (an MMS with a file), Twilio's answer read into a SendResult."""
        if self.status.state == FATAL:
            return RetryAfter(None, f"{self.name}: {self.status.reason}")
        if request.edit_of is not None:
            return Permanent("a text message cannot be edited", missing=True)
        config = self.config
        form = {"To": request.target.chat_id, "Body": request.text}
        form["StatusCallback"] = signed_urls(self.public, "status")[0]
        if config.messaging_service_sid:
            form["MessagingServiceSid"] = config.messaging_service_sid
        else:
            form["From"] = config.number or ""
        if request.file is not None:
            shelved = self._shelve(request.file)
            if not isinstance(shelved, str):
                return shelved
            form["MediaUrl"] = shelved
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        url = f"{self.base}{API}/{config.account_sid}/Messages.json"
        try:
            answer = HttpAnswer.of(await self.http.post(url, data=form, headers=self.auth))
        except httpx.HTTPError as exc:
            return failed_send(exc)
        if answer.status not in (200, 201):
            return self.refused(refusal_of(answer), CODES)
        body = answer.body if isinstance(answer.body, dict) else {}
        sid = body.get("sid")
        return Sent(str(sid)) if sid else Unconfirmed(f"{answer.status} without a sid")

    def _shelve(self, file: OutFile) -> str | SendResult:
        """The public URL Twilio fetches `file` from (for MEDIA_SECONDS), or why not."""
        if not self.config.media_url:
            return Permanent(
                f"{file.name} was not sent: a file goes by SMS only as an MMS whose media"
                f" Twilio fetches from hermes, and platforms.{self.name}.media_url (the"
                " public URL of the listener's /webhooks/sms/media) is unset"
            )
        if not Path(file.path).is_file():
            return file_gone(FileNotFoundError(2, "No such file"))
        now = trio.current_time()
        for token, (_, until) in list(self.shelf.items()):
            if until < now:
                del self.shelf[token]
        token = secrets.token_urlsafe(32)
        self.shelf[token] = (file, now + MEDIA_SECONDS)
        return f"{self.config.media_url.rstrip('/')}/{token}"


def _required(config: SmsConfig, secrets: Secrets) -> str:
    """The auth token (and the API key's secret, where a key is set); AdapterFatal naming
    what to set when one is unset."""
    if config.api_key_sid:
        required(secrets, config.api_key_secret_env, "sms", "api_key_secret_env")
    return required(secrets, config.token_env, "sms")


def _auth(config: SmsConfig, secrets: Secrets, token: str) -> dict[str, str]:
    """The Authorization header: HTTP Basic with the API key where one is set, else the
    account and its token. Given per request, never the client's: a redirect of media
    to its signed URL must not carry it."""
    user, password = config.account_sid or "", token
    if config.api_key_sid:
        user = config.api_key_sid
        password = secrets.get(config.api_key_secret_env) or ""
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {basic}"}


async def _account(
    http: httpx.AsyncClient, base: str, config: SmsConfig, auth: dict[str, str]
) -> str:
    """The account as the credentials read it; refused credentials are AdapterFatal."""
    response = await http.get(f"{base}{API}/{config.account_sid}.json", headers=auth)
    if response.status_code in (401, 403, 404):
        raise AdapterFatal(
            f"Twilio refused the token for account {config.account_sid}"
            f" ({response.status_code}): check account_sid, {config.token_env} and any API key"
        )
    response.raise_for_status()
    info = response.json()
    return f"{info.get('friendly_name', '?')} ({info.get('status', '?')})"


def refusal_of(answer: HttpAnswer) -> Refusal:
    """A refused send: Twilio's `code`, its message, a Retry-After where it sends one."""
    body = answer.body if isinstance(answer.body, dict) else {}
    code = str(body.get("code") or "")
    reason = f"{answer.status} {body.get('message') or 'error'} ({code or None})"
    return Refusal(answer.status, code, reason, retry_after(answer.headers))
