"""The Microsoft Teams adapter: the Bot Framework's protocol with hermes's own client.

- Inbound: Teams POSTs each activity to the webhook listener (`/webhooks/<name>`). Its
  JWT is checked first (hermes/adapters/teams/verify.py); anything unproven is a 401 and
  costs nothing more (no admission, no fetch beyond the rate-limited key refresh). A
  message is admitted to the journal, the conversation's serviceUrl committed with it
  (kept per chat: a send goes only to a serviceUrl that came signed, or to the configured
  connector), before the 200; one that could not be admitted is a 500, and Teams sends it
  again. A file consent answer (`fileConsent/invoke`) is answered 200 and its upload runs
  beside (files.py).
- Nothing to poll: the adapter is live once the app's secret got a token and the signing
  keys are read; a refused secret is fatal, with the identity platform's reason.
- Outbound: each chunk an activity POSTed to `{serviceUrl}/v3/conversations/{id}/
  activities` (a channel's reply chain is its root's conversation id), with the app's
  token (login.py: fetched again once on a 401; a refused secret then is fatal, the rows
  kept); buttons as an Adaptive Card (cards.py); an edit a PUT of the activity; typing an
  activity of its own. 429 waits its Retry-After; 412 (a conflict with a concurrent
  operation on the conversation) goes again; 413 (MessageSizeTooBig), 403 (the bot was
  removed, or blocked) and 404 are dead letters with the reason.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import trio

from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    Cursor,
    Fetched,
    InboundEvent,
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer, failed_send
from hermes.adapters.media import FILE_SECONDS, MediaError, download
from hermes.adapters.refusals import Codes, Refusal, retry_after
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.teams.cards import card
from hermes.adapters.teams.config import TeamsConfig
from hermes.adapters.teams.files import consent_card, info_card, pieces
from hermes.adapters.teams.inbound import conversation_of, event_of
from hermes.adapters.teams.login import Login, SecretRefused
from hermes.adapters.teams.verify import Keys, Refused, claims, matches
from hermes.adapters.webhooks import NO_SUCH_WEBHOOK, UNAUTHORIZED, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

DEFAULT_SERVICE = "https://smba.trafficmanager.net/teams/"  # Microsoft's, for proactive sends
CODES = Codes(  # the connector's error codes
    passing=frozenset({"PreconditionFailed"}),  # 412: retry, as Microsoft's guidance says
    gone=frozenset({"NotFound", "ActivityNotFoundInConversation"}),
)
OK = WebhookAnswer(200, b"", "application/json")
FILE_INVOKE = "fileConsent/invoke"


class TeamsAdapter(HttpAdapter[TeamsConfig]):
    receives_when_refused = True  # Teams delivers whatever our secret; sends wait for it
    platform = "teams"
    progress_deadline = math.inf  # it is pushed to: nothing it waits on can go deaf
    concurrent_sends = 16
    typing_every = 3.0  # Teams shows "typing" about three seconds

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.app_id = self.config.app_id or ""
        self.default_service = self.config.base_url or DEFAULT_SERVICE
        self.services: dict[str, str] = {}  # chat -> its serviceUrl, from verified activities
        self.files: dict[str, OutFile] = {}  # a consent card's key -> its file
        self.service_key = f"{setup.name}:service:"
        self.file_key = f"{setup.name}:file:"
        self.login: Login | None = None
        self.keys: Keys | None = None

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """The app's id and secret get a token from Microsoft's identity platform."""
        config = cls.configured(config)
        secret = required(secrets, config.token_env, cls.platform)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            await _log_in(Login(http, config.login_url, config.tenant_id, _app(config), secret))
        return f"app {config.app_id} (a token for the Bot Framework's connector)"

    # -- the actor ----------------------------------------------------------------

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()
        assert self.http is not None
        secret = self.secrets.get(self.config.token_env) or ""
        self.login = Login(
            self.http, self.config.login_url, self.config.tenant_id, self.app_id, secret
        )
        self.keys = Keys(self.http, self.config.openid_url)

    async def connect(self) -> None:
        required(self.secrets, self.config.token_env, self.platform)
        _app(self.config)
        assert self.login is not None and self.keys is not None  # made by on_start
        await _log_in(self.login)
        await self.keys.fetch()
        if self.cursors is not None:
            self.services.update(await self.cursors.prefixed(self.service_key))
        log.info("%s: app %s; activities come to /webhooks/%s", self.name, self.app_id, self.name)
        self.progress()
        await trio.sleep_forever()  # live until stopped: activities come to the listener

    # -- receiving ------------------------------------------------------------------

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        if request.path:  # the messaging endpoint is /webhooks/<name> itself
            return NO_SUCH_WEBHOOK
        if request.method != "POST":
            return WebhookAnswer(405, b"POST\n")
        if self.keys is None:
            return WebhookAnswer(503, b"not ready; send again\n")
        try:
            verified = await claims(self.keys, request.headers.get("authorization"), self.app_id)
            activity = json.loads(request.body)
            if not isinstance(activity, dict):
                raise Refused("the body is no activity")
            matches(verified, activity)
        except (Refused, ValueError) as exc:
            log.warning("%s: a request was refused (401): %s", self.name, exc)
            return UNAUTHORIZED
        service = str(activity["serviceUrl"])
        kind = activity.get("type")
        try:
            if kind == "message":
                event = event_of(activity, self.platform)
                if event is not None:
                    await self.admit(event, Cursor(self.service_key + event.chat_id, service))
                    self.services[event.chat_id] = service
            elif kind == "invoke" and activity.get("name") == FILE_INVOKE:
                await self._consent(activity, service)
            elif kind == "conversationUpdate":  # added to a chat: hermes may write there
                await self._remember(activity, service)
        except Exception as exc:  # not in: Teams sends it again
            log.error("%s: an activity could not be admitted: %r", self.name, exc)
            return WebhookAnswer(500, b"not admitted; send again\n")
        if self.status.state != FATAL:  # activities come; a refused secret still stops sends
            self.progress()
        return OK

    async def _remember(self, activity: dict[str, Any], service: str) -> None:
        conversation = activity.get("conversation")
        chat = conversation.get("id") if isinstance(conversation, dict) else None
        if isinstance(chat, str) and chat:
            chat = chat.partition(";messageid=")[0]
            self.services[chat] = service
            if self.cursors is not None:
                await self.cursors.put(self.service_key + chat, service)

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each file of an authorized message, from its pre-authorised download URL (no
        token goes with it), streamed to the cache."""
        if self.cache is None or self.http is None:
            return Fetched((), tuple(f"[{self.name} cannot save files here]" for _ in attachments))
        files, problems = [], []
        for ref in attachments:
            name, _, url = ref.partition("|")
            try:
                with trio.fail_after(FILE_SECONDS):
                    saved = await download(
                        self.http, url, self.cache, Path(name).name or "file", None, self.media
                    )
                files.append(saved)
            except (httpx.HTTPError, MediaError, ValueError, OSError, trio.TooSlowError) as exc:
                problems.append(f"[the file {name} could not be fetched: {exc!r}]")
        return Fetched(tuple(files), tuple(problems))

    # -- sending --------------------------------------------------------------------

    async def _service(self, chat: str) -> str:
        found = self.services.get(chat)
        if found is None and self.cursors is not None:
            found = await self.cursors.get(self.service_key + chat)
            if found is not None:
                self.services[chat] = found
        return found or self.default_service

    async def _activities(self, chat: str, thread: str | None) -> str:
        service = (await self._service(chat)).rstrip("/")
        conversation = quote(conversation_of(chat, thread), safe="")
        return f"{service}/v3/conversations/{conversation}/activities"

    async def send(self, request: SendRequest) -> SendResult:
        """A message (or its edit): text, or an Adaptive Card with the buttons; a file's
        consent card; the connector's answer read into a SendResult."""
        if self.status.state == FATAL:
            return RetryAfter(None, f"{self.name}: {self.status.reason}")
        target = request.target
        url = await self._activities(target.chat_id, target.thread_id)
        if request.file is not None:
            return await self._offer(request, request.file, url)
        activity: dict[str, Any] = {"type": "message"}
        if request.buttons:
            activity["attachments"] = [card(request.text, request.buttons)]
        else:
            activity["text"] = request.text
            activity["textFormat"] = "plain" if request.plain else "markdown"
        if request.reply_to:
            activity["replyToId"] = request.reply_to
        method = "POST"
        if request.edit_of is not None:
            url, method = f"{url}/{quote(request.edit_of, safe='')}", "PUT"
            activity["id"] = request.edit_of
        answer = await self._call(method, url, activity)
        if not isinstance(answer, HttpAnswer):
            return answer
        return self._taken(answer, request.edit_of)

    async def type_once(self, event: InboundEvent) -> None:
        url = await self._activities(event.chat_id, event.thread_id)
        await self._call("POST", url, {"type": "typing"})

    async def _offer(self, request: SendRequest, file: OutFile, url: str) -> SendResult:
        """A file's consent card, in a personal chat only (its answer uploads it)."""
        if request.target.chat_id.startswith("19:"):  # a channel's or a group chat's id
            return Permanent(
                f"{file.name} was not sent: Teams lets a bot send files only in a personal"
                " chat (with the user's consent)"
            )
        key = request.idempotency_key
        self.files[key] = file
        if self.cursors is not None:
            await self.cursors.put(self.file_key + key, file.to_json())
        activity = {"type": "message", "attachments": [consent_card(file, key, request.text)]}
        answer = await self._call("POST", url, activity)
        return answer if not isinstance(answer, HttpAnswer) else self._taken(answer, None)

    async def _consent(self, activity: dict[str, Any], service: str) -> None:
        """The user's answer to a consent card: on Allow, the upload and the file's card
        start beside (the invoke is answered at once, as Teams asks)."""
        value = activity.get("value") if isinstance(activity.get("value"), dict) else {}
        context = value.get("context") if isinstance(value.get("context"), dict) else {}
        key = str(context.get("hermes_file") or "")
        file = self.files.get(key)
        if file is None and key and self.cursors is not None:
            kept = await self.cursors.get(self.file_key + key)
            file = OutFile.from_json(kept) if kept else None
        if file is None or value.get("action") != "accept":
            log.info("%s: a file was declined, or is no longer kept (%s)", self.name, key[:40])
            return
        upload = value.get("uploadInfo") if isinstance(value.get("uploadInfo"), dict) else {}
        conversation = activity.get("conversation") or {}
        chat = str(conversation.get("id") or "").partition(";messageid=")[0]
        self.services.setdefault(chat, service)
        self.nursery.start_soon(self._upload, file, upload, chat)

    async def _upload(self, file: OutFile, upload: dict[str, Any], chat: str) -> None:
        """The bytes PUT to the user's upload URL (no token of ours), then the file's card."""
        assert self.http is not None
        target = upload.get("uploadUrl")
        if not isinstance(target, str) or not target.startswith(("https://", "http://")):
            log.warning("%s: a consent answer without an upload URL", self.name)
            return
        size = file.size
        headers = {
            "content-range": f"bytes 0-{max(size - 1, 0)}/{size}",
            "content-length": str(size),
        }
        try:
            async with self._files:
                response = await self.http.put(target, content=pieces(file.path), headers=headers)
            response.raise_for_status()
        except (httpx.HTTPError, OSError) as exc:
            log.warning("%s: %s could not be uploaded: %r", self.name, file.name, exc)
            return
        url = await self._activities(chat, None)
        activity = {"type": "message", "attachments": [info_card(upload, file.name)]}
        answer = await self._call("POST", url, activity)
        if not isinstance(answer, HttpAnswer) or answer.status >= 300:
            log.warning("%s: the card of %s was not shown: %r", self.name, file.name, answer)

    async def _call(self, method: str, url: str, body: dict[str, Any]) -> HttpAnswer | SendResult:
        """One request to the connector with the app's token; a 401 fetches a new token
        and tries once more. A 401 to the token just issued is not about the secret (the
        identity platform took it): that conversation's connector refuses the app (another
        cloud or tenant), so that send is a dead letter and the adapter goes on."""
        assert self.login is not None
        try:
            token = await self.login.current()
            answer = await self._request(method, url, body, token)
            if isinstance(answer, HttpAnswer) and answer.status == 401:
                answer = await self._request(method, url, body, await self.login.renew(token))
                if isinstance(answer, HttpAnswer) and answer.status == 401:
                    said = refusal_of(answer).reason
                    return Permanent(f"the connector refused a token just issued: {said}")
        except SecretRefused as exc:
            refusal = Refusal(401, "invalid_client", f"Microsoft refused the app's secret: {exc}")
            return self.refused(refusal, CODES)
        except httpx.HTTPError as exc:
            return RetryAfter(None, f"no token: {type(exc).__name__}")
        return answer

    async def _request(
        self, method: str, url: str, body: dict[str, Any], token: str
    ) -> HttpAnswer | SendResult:
        if self.http is None or self._requests is None:
            return RetryAfter(None, "the adapter is not started")
        request = self._requests.post(url, body, method=method)
        request.headers["authorization"] = f"Bearer {token}"
        try:
            return HttpAnswer.of(await self.http.send(request))
        except httpx.HTTPError as exc:
            return failed_send(exc)

    def _taken(self, answer: HttpAnswer, edit_of: str | None) -> SendResult:
        """The connector's answer to a send as a send result."""
        if not 200 <= answer.status < 300:
            return self.refused(refusal_of(answer), CODES, edit_of)
        body = answer.body if isinstance(answer.body, dict) else {}
        found = body.get("id") or edit_of
        return Sent(str(found)) if found else Unconfirmed(f"{answer.status} without an id")


def _app(config: TeamsConfig) -> str:
    if not config.app_id:
        raise AdapterFatal("set platforms.teams.app_id (the Azure Bot's Microsoft App ID)")
    return config.app_id


async def _log_in(login: Login) -> None:
    """A token for the app; a refused secret is AdapterFatal, with the platform's reason."""
    try:
        await login.current()
    except SecretRefused as exc:
        reason = f"Microsoft's identity platform refused the token request: {exc}"
        raise AdapterFatal(reason) from None


MEANINGS = {
    412: "PreconditionFailed: a conflict with a concurrent operation on the conversation",
    413: "MessageSizeTooBig: the message is over Teams's size limit",
    403: "Forbidden: the bot is not in the conversation, or was blocked or disabled",
    404: "NotFound: no such conversation or activity",
}


def refusal_of(answer: HttpAnswer) -> Refusal:
    """A refused send: the connector's `error.code` and message, the status's documented
    meaning, and a Retry-After where it sent one."""
    body = answer.body if isinstance(answer.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    meaning = MEANINGS.get(answer.status, "")
    code = str(error.get("code") or meaning.partition(":")[0] or "")
    said = str(error.get("message") or meaning or "error")[:300]
    reason = f"{answer.status} {code}: {said}" if code else f"{answer.status} {said}"
    return Refusal(answer.status, code, reason, retry_after(answer.headers))
