"""The iMessage adapter: a client of the user's BlueBubbles server (its REST API, httpx),
its deliveries pushed to hermes's webhook listener.

- Inbound: BlueBubbles POSTs each event to `/webhooks/<name>?token=<secret>`; the token
  (`webhook_token_env`) is compared in constant time first, and a request without it is
  a 401 that reads nothing more. A `new-message` is admitted (inbound.py) before the
  200, and moves no cursor (the journal knows its guid when the catch-up brings it);
  `updated-message` (read receipts, delivered, edits) and the rest are answered 200 and
  start nothing.
- Catch-up: BlueBubbles does not deliver a failed webhook again, and sends nothing while
  hermes is away, so at every start and every `catch_up_every` seconds the server's
  message query is read from a margin before the newest date the last catch-up saw,
  oldest first, paged: what the webhook missed is admitted, and what it brought too is
  admitted once (the journal knows the guid; one this adapter admitted within the margin
  is not handed to it again). Only a catch-up that read every page moves that date (kept
  in state.db): a webhook's admission of a later message never skips one whose delivery
  failed. At the very first start the catch-up starts from now. Each query answered is
  progress: a server that stops answering misses the deadline, and the next connection
  catches up.
- Outbound: `POST /api/v1/message/text` with a `tempGuid` made from the outbox row's
  idempotency key. BlueBubbles drops no repeated `tempGuid`, and its message query does
  not return one, so a send whose answer was lost (a timeout, a dropped connection) is
  not blindly sent again: this adapter keeps when it first tried the row (in state.db,
  once the answer is lost), and before the next try asks the server for hermes's
  messages in the chat created since: one of the same text is the send's result. A file
  cannot be told by its text: a lost file send is Unconfirmed (`unknown` for the
  operator). Files go by `POST /api/v1/message/attachment` (multipart), their caption
  first as a text of its own. Typing (`POST /api/v1/chat/{guid}/typing`) and the private
  API's send method only where the server says its private API is on. No edits.
- Attachments in: `GET /api/v1/attachment/{guid}/download`, only for an authorized event,
  capped as every platform's media.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import trio

from hermes.actors.clock import Clock
from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    Fetched,
    InboundEvent,
    OutFile,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer
from hermes.adapters.imessage.api import (
    CODES,
    PAGE,
    BlueBubblesError,
    api_url,
    call,
    query,
    refusal_of,
)
from hermes.adapters.imessage.config import IMessageConfig
from hermes.adapters.imessage.inbound import AttachmentRef, created, message_event, named
from hermes.adapters.media import FILE_SECONDS, MAX_ATTACHMENTS, MediaError, Saved, download
from hermes.adapters.refusals import is_auth
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.webhooks import NO_SUCH_WEBHOOK, UNAUTHORIZED, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
# The catch-up starts this long before the newest message it saw: `dateCreated` is when
# Messages recorded it, and a message of the same moment may reach the server's database
# after one it already served. What the margin brings again is admitted once.
CATCH_UP_MARGIN_MS = 60_000
OK = WebhookAnswer(200, b"{}", "application/json")


def temp_guid(key: str) -> str:
    """The `tempGuid` of the send of an outbox row's idempotency key: the same at every try."""
    return "hermes-" + hashlib.sha256(key.encode()).hexdigest()[:32]


class IMessageAdapter(HttpAdapter[IMessageConfig]):
    platform = "imessage"
    receives_when_refused = True  # the server pushes whatever our password; sends wait
    typing_every = 5.0  # iMessage shows the bubble for a few seconds after each

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.password = setup.secrets.get(self.config.token_env) or ""
        self.webhook_token = setup.secrets.get(self.config.webhook_token_env) or ""
        self.base = (self.config.base_url or "").rstrip("/")
        self.progress_deadline = 2 * self.config.catch_up_every + 30.0
        self.names = named(self.config.names)
        self.since_key = f"{setup.name}:since"
        self.since: int | None = None  # the newest dateCreated (ms) a catch-up saw
        self.lost_key = f"{setup.name}:lost:"  # + tempGuid: its first try (ms), answer lost
        self.tried: dict[str, int] = {}  # tempGuid -> its first try (ms) in this run
        self.lost: dict[str, int] = {}  # those of them whose answer was lost
        self.captioned: dict[str, int] = {}  # a file's caption sent (ms), its file not yet
        self.recent: dict[str, int] = {}  # admitted, not yet before the margin
        self.taking: set[str] = set()  # in admission now
        self.journal_days = setup.journal_days
        self.clock = setup.cursors.clock if setup.cursors is not None else Clock()
        self.private_api = False
        self.method = "apple-script"

    def url(self, path: str) -> str:
        return api_url(self.base, path, self.password)

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`GET /api/v1/server/info` with the server password, as `connect()` starts."""
        config = cls.configured(config)
        password = required(secrets, config.token_env, cls.platform)
        base = _server(config, cls.platform)
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            info = await _info(http, base, password)
        api = "on" if info.get("private_api") else "off"
        return f"BlueBubbles {info.get('server_version') or '?'} at {base} (private API {api})"

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()

    # -- receiving --------------------------------------------------------------------

    async def connect(self) -> None:
        required(self.secrets, self.config.token_env, self.platform)
        required(self.secrets, self.config.webhook_token_env, self.platform, "webhook_token_env")
        _server(self.config, self.platform)
        assert self.http is not None  # opened by on_start
        info = await _info(self.http, self.base, self.password)
        self.private_api = bool(info.get("private_api"))
        self.method = "private-api" if self.private_api else "apple-script"
        self._alive()
        await self._first_since()
        if self.cursors is not None:  # a lost send older than the outbox's freshness is done
            await self.cursors.forget(self.lost_key, self.clock.now() - DAY_MS / 1000)
        log.info("%s: BlueBubbles at %s; messages come to its webhook", self.name, self.base)
        while True:
            await self._catch_up()
            self.settled()
            await trio.sleep(self.config.catch_up_every)

    def _alive(self) -> None:
        """Progress, unless a send found the password refused meanwhile."""
        if self.status.state != FATAL:
            self.progress()

    async def _first_since(self) -> None:
        """Where the catch-up starts: the last admitted message's date (kept in state.db);
        at the very first start, now, kept so a crash before any admission catches up
        from it."""
        if self.since is not None:
            return
        kept = await self.cursors.get(self.since_key) if self.cursors is not None else None
        if kept is not None:
            self.since = int(float(kept))
            return
        self.since = int(self.clock.now() * 1000)
        if self.cursors is not None:
            await self.cursors.put(self.since_key, str(self.since))

    async def _catch_up(self) -> None:
        """Every message created since the margin before `since` (not before the journal's
        days), oldest first, a page at a time."""
        assert self.http is not None and self.since is not None
        oldest = int(self.clock.now() * 1000) - int(self.journal_days * DAY_MS)
        after = max(self.since - CATCH_UP_MARGIN_MS, oldest)
        offset = taken = 0
        newest = self.since
        while True:
            page = await self._call("message/query", query(after, offset))
            self._alive()
            found = [m for m in page if isinstance(m, dict)] if isinstance(page, list) else []
            for message in found:
                taken += await self._take(message)
                newest = max(newest, created(message) or 0)
            if len(found) < PAGE:
                break
            offset += len(found)
        if taken:
            log.info("%s: caught up %d message(s) since %d", self.name, taken, after)
        if newest > self.since:  # every page read: what is older than the margin is in
            if self.cursors is not None:
                await self.cursors.put(self.since_key, str(newest))
            self.since = newest
        cut = self.since - CATCH_UP_MARGIN_MS  # what the next query cannot bring again
        self.recent = {guid: when for guid, when in self.recent.items() if when >= cut}

    async def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """A call of the catch-up: a 429 waits as told, a 401 is fatal."""
        assert self.http is not None
        while True:
            try:
                return await call(self.http, self.base, self.password, path, body)
            except BlueBubblesError as exc:
                refusal = exc.refusal
                if refusal.status == 429:
                    await self.wait_as_told(refusal.retry_after or 1.0, refusal.reason)
                    continue
                if refusal.status == 401:
                    raise AdapterFatal(
                        f"BlueBubbles refused the password ({refusal.reason})"
                    ) from None
                raise

    async def _take(self, message: dict[str, Any]) -> bool:
        """Admit a message (no cursor: only the catch-up moves it); skipped: what is no
        event, and a message admitted within the margin already. Whether it was handed to
        admission."""
        guid = message.get("guid")
        if not isinstance(guid, str) or not guid or guid in self.recent or guid in self.taking:
            return False
        try:
            event = message_event(message, self.platform, self.names)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            log.warning("%s: skipping a malformed message: %r", self.name, exc)
            return False
        when = created(message)
        if event is None or when is None:
            return False
        self.taking.add(guid)  # the webhook and a catch-up at once: one hands it over
        try:
            await self.admit(event)
        finally:
            self.taking.discard(guid)
        self.recent[guid] = when
        return True

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        if request.path:  # BlueBubbles posts to /webhooks/<name> itself
            return NO_SUCH_WEBHOOK
        if request.method != "POST":
            return WebhookAnswer(405, b"POST\n")
        given = request.query.get("token", "").encode("utf-8", "replace")
        if not self.webhook_token or not hmac.compare_digest(given, self.webhook_token.encode()):
            log.warning("%s: a delivery without the webhook's token was refused", self.name)
            return UNAUTHORIZED
        try:
            payload = json.loads(request.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return WebhookAnswer(400, b"not an event\n")
        data = payload.get("data")
        if payload.get("type") == "new-message" and isinstance(data, dict):
            try:
                await self._take(data)
            except Exception as exc:  # not in: the catch-up brings it
                log.error("%s: a message could not be admitted: %r", self.name, exc)
                return WebhookAnswer(500, b"not admitted\n")
        self._alive()
        return OK

    async def type_once(self, event: InboundEvent) -> None:
        if self.private_api and self.http is not None:
            await self.http.post(self.url(f"chat/{quote(event.chat_id, safe='')}/typing"))

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each attachment of an authorized message, from the server by its guid, streamed
        to the cache within the media limits."""
        if self.cache is None or self.http is None:
            return Fetched((), tuple(f"[{self.name} cannot save files here]" for _ in attachments))
        files: list[Saved] = []
        problems: list[str] = []
        for text in attachments[:MAX_ATTACHMENTS]:
            try:
                ref = AttachmentRef.from_text(text)
                if ref.size is not None and ref.size > self.media.max_file:
                    raise MediaError(
                        f"{ref.name} is {ref.size} bytes, over the {self.media.max_file} limit"
                    )
                url = self.url(f"attachment/{quote(ref.guid, safe='')}/download")
                tag = hashlib.sha256(ref.guid.encode()).hexdigest()[:12]
                with trio.fail_after(FILE_SECONDS):
                    name = f"{tag}-{Path(ref.name).name}"
                    saved = await download(self.http, url, self.cache, name, ref.mime, self.media)
                files.append(saved)
            except MediaError as exc:
                problems.append(f"[an attachment could not be fetched: {exc}]")
            except (httpx.HTTPError, OSError, KeyError, ValueError, trio.TooSlowError) as exc:
                # httpx's words may name the URL, which carries the password: the kind only
                problems.append(f"[an attachment could not be fetched: {type(exc).__name__}]")
        return Fetched(tuple(files), tuple(problems))

    # -- sending ----------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if self.status.state == FATAL:  # a refused password: the rows wait for a new one
            return RetryAfter(None, f"{self.name}: {self.status.reason}")
        chat = request.target.chat_id
        temp = temp_guid(request.idempotency_key)
        if request.file is None:
            return await self._text(chat, temp, request.text, request.again)
        caption = temp + "-text"
        if request.text and caption not in self.captioned:  # no captions: the text first
            said = await self._text(chat, caption, request.text, request.again)
            if not isinstance(said, Sent):
                return said
            self.captioned[caption] = int(self.clock.now() * 1000)  # the file may wait
        return await self._file(chat, temp, request.file, request.again)

    async def _text(self, chat: str, temp: str, text: str, again: bool) -> SendResult:
        if (earlier := await self._earlier(chat, temp, text, again)) is not None:
            return earlier
        body = {"chatGuid": chat, "tempGuid": temp, "message": text, "method": self.method}
        answer = self._taken(await self.post(self.url("message/text"), body), "message/text")
        if isinstance(answer, Unconfirmed):  # looked up before the next try
            await self._lost(temp)
            return RetryAfter(None, f"{answer.reason}; looked up before it goes again")
        return answer

    async def _file(self, chat: str, temp: str, file: OutFile, again: bool) -> SendResult:
        if (earlier := await self._earlier(chat, temp, None, again)) is not None:
            return earlier
        fields = {"chatGuid": chat, "tempGuid": temp, "name": file.name, "method": self.method}
        answer = await self.upload(self.url("message/attachment"), fields, {"attachment": file})
        return self._taken(answer, "message/attachment")  # lost: Unconfirmed, never looked up

    async def _earlier(
        self, chat: str, temp: str, text: str | None, again: bool
    ) -> SendResult | None:
        """What became of an earlier try of a row handed over before: None when none was
        sent (its tries were answered, or the look-up found none: it goes now)."""
        now = int(self.clock.now() * 1000)
        self.tried = {t: at for t, at in self.tried.items() if at > now - DAY_MS}
        self.lost = {t: at for t, at in self.lost.items() if at > now - DAY_MS}
        self.captioned = {t: at for t, at in self.captioned.items() if at > now - DAY_MS}
        self.tried.setdefault(temp, now)
        if not again:
            return None
        first = await self._lost_since(temp)
        if first is None:  # every earlier try was answered (a refusal, a wait): none sent
            return None
        if text is None:
            return Unconfirmed("a file send's answer was lost: a file cannot be looked up")
        return await self._sent_before(chat, temp, text, first)

    async def _lost(self, temp: str) -> None:
        """The answer of `temp`'s try was lost: its first try's time, kept across restarts."""
        self.lost[temp] = self.tried[temp]
        if self.cursors is not None:
            await self.cursors.put(self.lost_key + temp, str(self.tried[temp]))

    async def _lost_since(self, temp: str) -> int | None:
        """When `temp` was first tried, where a try's answer was lost."""
        if temp in self.lost or self.cursors is None:
            return self.lost.get(temp)
        kept = await self.cursors.get(self.lost_key + temp)
        return int(kept) if kept is not None else None

    async def _sent_before(self, chat: str, temp: str, text: str, first: int) -> SendResult | None:
        """A text whose answer was lost: Sent when the server has hermes's message of that
        text in the chat, created since its first try by hermes's clock (the query does
        not return a `tempGuid`; the Mac's clock is taken to agree), or one that carries
        this `tempGuid` where a server does return it (one carrying another is not this
        send); None when it has none (it goes now); RetryAfter when it cannot tell."""
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        body = {**query(first, chat=chat), "sort": "DESC", "with": ["chat"]}
        body["where"] = [{"statement": "message.is_from_me = :me", "args": {"me": 1}}]
        try:
            page = await call(self.http, self.base, self.password, "message/query", body)
        except BlueBubblesError as exc:
            if is_auth(exc.refusal, CODES):
                return self.refused(exc.refusal, CODES)
            return RetryAfter(None, f"an earlier try could not be looked up: {exc.refusal.reason}")
        except httpx.HTTPError as exc:
            return RetryAfter(None, f"an earlier try could not be looked up: {type(exc).__name__}")
        for message in page if isinstance(page, list) else []:
            if not isinstance(message, dict) or not message.get("isFromMe"):
                continue
            kept = message.get("tempGuid")
            if kept == temp or (not kept and message.get("text") == text):
                log.info("%s: an earlier try was sent; not sending it again", self.name)
                return Sent(str(message.get("guid") or "") or None)
        return None

    def _taken(self, answer: HttpAnswer | SendResult, what: str) -> SendResult:
        if not isinstance(answer, HttpAnswer):
            return answer
        refusal = refusal_of(answer, f"POST {what}")
        if refusal is not None:
            return self.refused(refusal, CODES)
        data = answer.body.get("data") if isinstance(answer.body, dict) else None
        guid = data.get("guid") if isinstance(data, dict) else None
        return Sent(str(guid) if guid else None)


def _server(config: IMessageConfig, platform: str) -> str:
    if not config.base_url:
        raise AdapterFatal(f"no server: set platforms.{platform}.base_url (your BlueBubbles)")
    return config.base_url.rstrip("/")


async def _info(http: httpx.AsyncClient, base: str, password: str) -> dict[str, Any]:
    """The server's `server/info`; AdapterFatal for a refused password."""
    try:
        info = await call(http, base, password, "server/info")
    except BlueBubblesError as exc:
        if exc.refusal.status in (401, 403):
            raise AdapterFatal(f"BlueBubbles refused the token ({exc.refusal.reason})") from None
        raise
    return info if isinstance(info, dict) else {}
