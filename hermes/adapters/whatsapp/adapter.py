"""The WhatsApp adapter (Cloud API): deliveries come by webhook, sends go to the Graph
API's messages endpoint.

- Inbound: the webhook listener hands each request here (`WebhookRequest`, a call).
  The subscription handshake echoes `hub.challenge` for the right verify token
  (compared in constant time); a POST is refused (403) unless it carries the
  HMAC-SHA256 of its raw body under the app secret. Each message is admitted to the
  journal, keyed by its wamid, with the time its user wrote (which opens the 24-hour
  window) committed in the same transaction, before the 200: a delivery that could
  not be admitted is a 500, and Meta delivers it again; a delivery again of what was
  admitted is recognised. A message written before the journal's retention reaches
  back (`retention.journal_days`) may be forgotten there, so it is acknowledged and not
  admitted, logged once (inbound.forgotten). Then, best effort, the message is marked
  read with the typing indicator on. A `failed` status marks the outbox row of that
  send dead, committed before the 200 too.
- Nothing to poll: the adapter is live once the token reads its number, and stays so;
  a refused token is fatal.
- Outbound: one message per chunk, no link previews. A user whose last message is
  older than 24 hours cannot be sent a free-form message: it goes as the configured
  template (the chunk's first line as its parameter), or dies at once saying why;
  never retried for a day. Rate errors (429, 130429, 131056) retry that send later.
- Files: uploaded first (`POST /{phone-number-id}/media`), then a message refers to the
  media id (hermes/adapters/whatsapp/files.py says which). The upload shows the user
  nothing, so any failure of it, a lost answer too, lets the whole send go again; only
  a lost answer of the message is unknown, as for text. A template carries no file:
  outside the window a file dies at once.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    Cursor,
    Fetched,
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer
from hermes.adapters.media import FILE_SECONDS, MediaError, Saved, download
from hermes.adapters.refusals import Codes, Refusal, retry_after
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.signatures import signed
from hermes.adapters.url_media import trusted
from hermes.adapters.webhooks import FORBIDDEN, NO_SUCH_WEBHOOK, WebhookAnswer, WebhookRequest
from hermes.adapters.whatsapp.config import WhatsAppConfig
from hermes.adapters.whatsapp.files import declared, kind_of, media_message
from hermes.adapters.whatsapp.inbound import (
    DAY,
    SIGNATURE_HEADER,
    failures,
    forgotten,
    messages,
    read_media_ref,
)
from hermes.config import Secrets

log = logging.getLogger(__name__)

DEFAULT_BASE = "https://graph.facebook.com/v21.0"
WINDOW = 24 * 3600.0  # the customer-service window: seconds after the user's last message
CODES = Codes(  # the Graph API's error codes
    rate_limited=frozenset({"4", "80007", "130429", "131056"}),  # app, account, throughput, pair
    auth=frozenset({"190"}),  # the access token expired or was revoked
)
OUTSIDE_WINDOW = "131047"  # "re-engagement message": outside the 24-hour window
MEDIA_HOSTS = ("fbsbx.com", "facebook.com", "whatsapp.net")  # where Meta serves media
OK = WebhookAnswer(200, b"ok\n")


class WhatsAppAdapter(HttpAdapter[WhatsAppConfig]):
    receives_when_refused = True  # Meta delivers whatever the token; sends wait for it
    platform = "whatsapp"
    progress_deadline = math.inf  # it is pushed to: nothing it waits on can go deaf
    concurrent_sends = 16

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.token = setup.secrets.get(config.token_env) or None
        self.app_secret = setup.secrets.get(config.app_secret_env) or None
        self.verify_token = setup.secrets.get(config.verify_token_env) or None
        self.base = (config.base_url or DEFAULT_BASE).rstrip("/")
        self.undelivered = setup.undelivered
        self.window_key = f"{setup.name}:window:"
        self.journal_days = setup.journal_days

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """The token reads the configured number (`GET /{phone-number-id}`)."""
        config = cls.configured(config)
        token = required(secrets, config.token_env, cls.platform)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            return await _number(http, (config.base_url or DEFAULT_BASE).rstrip("/"), config, token)

    # -- the actor ----------------------------------------------------------------

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()

    async def connect(self) -> None:
        token = required(self.secrets, self.config.token_env, self.platform)
        missing = [
            key
            for key, value in (
                ("app_secret_env", self.app_secret),
                ("verify_token_env", self.verify_token),
                ("phone_number_id", self.config.phone_number_id),
            )
            if not value
        ]
        if missing:
            raise AdapterFatal(f"set platforms.{self.name}.{missing[0]} (and its variable)")
        assert self.http is not None  # opened by on_start
        number = await _number(self.http, self.base, self.config, token)
        log.info("%s: sending as %s; deliveries come to /webhooks/%s", self.name, number, self.name)
        self.progress()
        await trio.sleep_forever()  # live until stopped: deliveries come to the listener

    # -- receiving ------------------------------------------------------------------

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        if request.path:  # Meta posts to /webhooks/<name> itself, nothing under it
            return NO_SUCH_WEBHOOK
        if request.method == "GET":
            return self._handshake(request.query)
        if self.app_secret is None or not signed(
            request.body, request.headers.get(SIGNATURE_HEADER), self.app_secret
        ):
            log.warning("%s: a delivery without a valid signature was refused", self.name)
            return FORBIDDEN
        try:
            payload = json.loads(request.body)
        except ValueError:
            return WebhookAnswer(400, b"not JSON\n")
        number = self.config.phone_number_id or ""
        now = self._now()
        try:
            for message in messages(payload, self.platform, number):
                if forgotten(message.written_at, now, self.journal_days):
                    self._refuse_old(message.event.event_id, now - message.written_at)
                    continue
                at = message.written_at or now  # no timestamp: it came now
                written = Cursor(self.window_key + message.event.chat_id, str(at), rising=True)
                if await self.admit(message.event, written):
                    self.nursery.start_soon(self._mark_read, message.event.event_id)
            for failed in failures(payload, self.platform, number):
                if self.undelivered is not None:
                    await self.undelivered(failed)
        except Exception as exc:  # not in: Meta delivers again
            log.error("%s: a delivery could not be admitted: %r", self.name, exc)
            return WebhookAnswer(500, b"not admitted; deliver again\n")
        if self.status.state != FATAL:  # deliveries come; a refused token still stops sends
            self.progress()
        return OK

    def _refuse_old(self, wamid: str, age: float) -> None:
        """A message too old for the journal to recognise again: acknowledged with the rest
        of its delivery (Meta stops retrying it), never admitted."""
        log.warning(
            "%s: message %s was written %.1f days ago, before the inbound journal"
            " reaches back (retention.journal_days: %g): acknowledged, not admitted",
            self.name,
            wamid,
            age / DAY,
            self.journal_days,
        )

    def _now(self) -> float:
        return self.cursors.clock.now() if self.cursors is not None else 0.0

    def _handshake(self, query: dict[str, str]) -> WebhookAnswer:
        """Meta's subscription check: echo the challenge for the right verify token."""
        token = query.get("hub.verify_token", "")
        right = self.verify_token is not None and hmac.compare_digest(
            token.encode(), self.verify_token.encode()
        )
        if query.get("hub.mode") != "subscribe" or not right:
            log.warning("%s: a webhook verification with a wrong token was refused", self.name)
            return FORBIDDEN
        return WebhookAnswer(200, query.get("hub.challenge", "").encode())

    async def _mark_read(self, wamid: str) -> None:
        """Best effort: the blue ticks and "typing..." while the turn runs (it ends with the
        answer, or after 25 s)."""
        body = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid,
            "typing_indicator": {"type": "text"},
        }
        answer = await self.post(self._messages_url(), body)
        if not isinstance(answer, HttpAnswer) or answer.status != 200:
            log.debug("%s: marking %s read failed: %r", self.name, wamid, answer)

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each media of an authorized message: its URL from the Graph API, then its bytes
        (at most the media limit), both with the token, streamed to the cache."""
        if self.cache is None or self.http is None:
            return Fetched((), tuple(f"[{self.name} cannot save media here]" for _ in attachments))
        files, problems = [], []
        for ref in attachments:
            kind, media_id, mime, name = read_media_ref(ref)
            try:
                with trio.fail_after(FILE_SECONDS):
                    files.append(await self._download(media_id, mime, name))
            except (httpx.HTTPError, MediaError, ValueError, OSError, trio.TooSlowError) as exc:
                problems.append(f"[the {kind} could not be fetched: {exc!r}]")
        return Fetched(tuple(files), tuple(problems))

    async def _download(self, media_id: str, mime: str, name: str) -> Saved:
        assert self.http is not None and self.cache is not None
        if not media_id.isdigit():
            raise ValueError(f"{media_id!r} is not a media id")
        info = (await self.http.get(f"{self.base}/{media_id}")).raise_for_status().json()
        url = httpx.URL(str(info.get("url", "")))
        api = httpx.URL(self.base)  # the token goes to Meta (or a test's own API) only
        if not trusted(str(url), (*MEDIA_HOSTS, f"{api.scheme}://{api.netloc.decode()}")):
            raise ValueError(f"the media URL's host {url.host!r} is not Meta's")
        limit = self.media.max_file
        if int(info.get("file_size") or 0) > limit:
            raise ValueError(f"it is larger than {limit} bytes")
        # Named by its id first: two users' "invoice.pdf" never overwrite each other.
        return await download(
            self.http,
            str(url),
            self.cache,
            f"{media_id}-{Path(name).name}",
            mime or None,
            self.media,
        )

    # -- sending --------------------------------------------------------------------

    def _messages_url(self) -> str:
        return f"{self.base}/{self.config.phone_number_id}/messages"

    async def send(self, request: SendRequest) -> SendResult:
        """A text message, a file (uploaded, then a message referring to it), or the
        template outside the window; the Graph API's answer read into a SendResult."""
        if self.status.state == FATAL:
            return RetryAfter(None, f"{self.name}: {self.status.reason}")
        if request.edit_of is not None:
            return Permanent("WhatsApp messages cannot be edited", missing=True)
        chat = request.target.chat_id
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat,
        }
        if await self._in_window(chat):
            if request.file is None:
                body |= {"type": "text", "text": {"preview_url": False, "body": request.text}}
            else:
                kind = kind_of(request.file, request.text)
                media_id = await self._upload(declared(request.file, kind))
                if not isinstance(media_id, str):
                    return media_id
                body |= media_message(request.file, kind, media_id, request.text)
            if request.reply_to:
                body["context"] = {"message_id": request.reply_to}
        elif request.file is not None:
            return Permanent(
                f"outside WhatsApp's 24-hour window: {chat} last wrote more than 24 hours"
                " ago, and a file cannot reach them (a template carries none)"
            )
        elif self.config.template:
            first = next((line for line in request.text.splitlines() if line.strip()), "")
            parameter = {"type": "text", "text": first[:1024]}
            template = {
                "name": self.config.template,
                "language": {"code": self.config.template_language},
                "components": [{"type": "body", "parameters": [parameter]}],
            }
            body |= {"type": "template", "template": template}
        else:
            return Permanent(
                f"outside WhatsApp's 24-hour window: {chat} last wrote more than 24 hours"
                " ago, and a free-form message cannot reach them; set"
                f" platforms.{self.name}.template to an approved template to send such"
                " messages as it"
            )
        answer = await self.post(self._messages_url(), body)
        if not isinstance(answer, HttpAnswer):
            return answer
        return self._taken(answer)

    async def _upload(self, file: OutFile) -> str | SendResult:
        """The file uploaded for a message to refer to: its media id. Nothing shows in the
        chat yet, so a failure here, a lost answer too, is one the whole send may retry."""
        fields = {"messaging_product": "whatsapp", "type": file.mime}
        url = f"{self.base}/{self.config.phone_number_id}/media"
        answer = await self.upload(url, fields, {"file": file})
        if isinstance(answer, HttpAnswer):
            body = answer.body if isinstance(answer.body, dict) else {}
            if answer.status == 200 and body.get("id"):
                return str(body["id"])
            result = self._taken(answer) if answer.status != 200 else RetryAfter(None, "no id")
        else:
            result = answer
        if isinstance(result, Unconfirmed):  # an upload alone shows nothing: send it again
            return RetryAfter(None, f"the upload: {result.reason}")
        if isinstance(result, (RetryAfter, Permanent)):
            return attrs.evolve(result, reason=f"the upload: {result.reason}")
        return RetryAfter(None, f"the upload: {result!r}")  # a Sent cannot come of one

    async def _in_window(self, chat: str) -> bool:
        if self.cursors is None:
            return True  # nothing kept: let Meta decide (a failed status says so)
        written = await self.cursors.get(self.window_key + chat)
        try:
            return written is not None and self.cursors.clock.now() - float(written) < WINDOW
        except ValueError:
            return False

    def _taken(self, answer: HttpAnswer) -> SendResult:
        """The Graph API's answer to a send as a send result."""
        if answer.status != 200:
            return self.refused(refusal_of(answer), CODES)
        body = answer.body if isinstance(answer.body, dict) else {}
        sent = body.get("messages") or [{}]
        found = sent[0].get("id") if isinstance(sent[0], dict) else None
        return Sent(str(found)) if found else Unconfirmed("200 without a message id")


async def _number(http: httpx.AsyncClient, base: str, config: WhatsAppConfig, token: str) -> str:
    """The configured number as the token reads it; a refused token is AdapterFatal."""
    response = await http.get(
        f"{base}/{config.phone_number_id}",
        params={"fields": "display_phone_number,verified_name"},
        headers={"authorization": f"Bearer {token}"},
    )
    if response.status_code in (400, 401, 403):
        raise AdapterFatal(
            f"WhatsApp refused the token or the number ({response.status_code}): check"
            f" {config.token_env} and phone_number_id"
        )
    response.raise_for_status()
    info = response.json()
    return f"{info.get('display_phone_number', '?')} ({info.get('verified_name', '?')})"


def refusal_of(answer: HttpAnswer) -> Refusal:
    """A refused send: the Graph API's `error.code`, its message and details (and a
    Retry-After, where Meta sends one)."""
    body = answer.body if isinstance(answer.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    code = str(error.get("code") or "")
    details = (error.get("error_data") or {}).get("details") if error else None
    reason = f"{answer.status} {error.get('message') or 'error'} ({code or None})"
    reason += f": {details}" if details else ""
    if code == OUTSIDE_WINDOW:
        reason = f"outside WhatsApp's 24-hour window: {reason}"
    return Refusal(answer.status, code, reason, retry_after(answer.headers))
