"""The adapter for the fake chat platform (tests/fakes/chat_platform.py): long
polling for updates, admission before acknowledgement, typed send results.

It is the reference a real long-polling adapter (Telegram's) follows:
- `connect()` asks `me` (a refused token is fatal), then polls `updates` in a
  loop on one client. Every answer is progress, an empty one too. Each update
  becomes an InboundEvent handed to `admit`; only once admit returned does the
  offset move past it, so the next poll acknowledges it. An adapter that dies
  between the two gets the update again and admission recognises the duplicate.
- A 409 (another poller has the token) is an ordinary failure: the supervisor
  connects again after a backoff. A 401 at any time is fatal.
- `send()` uses a client kept for the adapter's life and never raises for the
  platform's answers: 200 Sent, 429 RetryAfter(retry_after), 5xx or no connection
  RetryAfter(None: back off), any other 4xx Permanent; a transport error after the
  request left (a read timeout, a dropped connection) is Unconfirmed: it may have
  arrived, and the outbox never sends it twice blindly.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import (
    ChatType,
    InboundEvent,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
)
from hermes.adapters.http_errors import failed_send

log = logging.getLogger(__name__)

REFUSED = "the token was refused (401 unauthorized)"


class PollConflict(Exception):
    """409: another poller holds the token; the supervisor connects again."""


class PlatformError(Exception):
    """An answer the connection cannot go on from (not 401, not 409)."""


class FakePlatformAdapter(PlatformAdapter):
    platform = "testplatform"
    progress_deadline = 3.0  # under the poll's HTTP timeout: a deaf platform is caught by it
    poll_timeout = 1.0  # seconds the platform holds a poll open
    http_slack = 3.0  # the client waits this much longer than the poll
    send_timeout = 10.0

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup.name, setup.status, setup.admit)
        self.platform = setup.name
        config = setup.config
        self.token_env = config.token_env
        self.token = setup.secrets.get(config.token_env) if config.token_env else None
        self.base_url = (config.base_url or "").rstrip("/")
        self.http: httpx.AsyncClient | None = None  # for sends, opened in on_start

    # -- the actor ------------------------------------------------------------

    async def on_start(self) -> None:
        # The client exists before the base starts the connection and reports ready.
        self.http = await self.exits.enter_async_context(
            httpx.AsyncClient(timeout=self.send_timeout)
        )
        await super().on_start()

    # -- the connection -------------------------------------------------------

    async def connect(self) -> None:
        if not self.token:
            raise AdapterFatal(f"no token: set {self.token_env or 'token_env'}")
        if not self.base_url:
            raise AdapterFatal("no base_url configured")
        timeout = httpx.Timeout(self.poll_timeout + self.http_slack)
        async with httpx.AsyncClient(timeout=timeout) as client:
            await self._get(client, "me")
            self.progress()
            offset = 0  # a new connection starts from whatever is still unacknowledged
            while True:
                params = {"offset": offset, "timeout": self.poll_timeout}
                body = await self._get(client, "updates", params)
                self.progress()
                for update in body.get("updates") or ():
                    event = self._event(update)
                    if event is not None:
                        await self.admit(event)  # committed (or a duplicate) before...
                    offset = max(offset, int(update["update_id"]) + 1)  # ...the ack

    async def _get(
        self, client: httpx.AsyncClient, call: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await client.get(self._url(call), params=params)
        body = _json(response)
        if response.status_code == 401:
            raise AdapterFatal(REFUSED)
        if response.status_code == 409:
            raise PollConflict(f"{call}: 409 {body.get('error') or 'conflict'}")
        if response.status_code != 200 or not body.get("ok"):
            raise PlatformError(
                f"{call}: {response.status_code} {body.get('error') or 'unexpected answer'}"
            )
        return body

    def _event(self, update: Any) -> InboundEvent | None:
        """The update as an InboundEvent; None for one that can never be admitted (it is
        skipped and acknowledged, or it would crash every connection after this one)."""
        try:
            return InboundEvent(
                platform=self.platform,
                event_id=str(update.get("event_id", update["update_id"])),
                chat_type=ChatType(update["chat_type"]),
                chat_id=str(update["chat_id"]),
                user_id=str(update["user_id"]),
                text=update.get("text") or "",
                thread_id=_opt_str(update.get("thread_id")),
                user_name=_opt_str(update.get("user_name")),
                is_bot=bool(update.get("is_bot")),
                message_id=_opt_str(update.get("message_id")),
                mentioned=bool(update.get("mentioned")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("%s: skipping a malformed update: %r", self.name, exc)
            return None

    # -- sending --------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        if not self.token or not self.base_url:
            return Permanent("the adapter has no token or base_url")
        payload = {
            "chat_id": request.target.chat_id,
            "thread_id": request.target.thread_id,
            "text": request.text,
            "reply_to": request.reply_to,
            "idempotency_key": request.idempotency_key,
        }
        try:
            response = await self.http.post(self._url("send"), json=payload)
        except httpx.HTTPError as exc:
            return failed_send(exc)
        status = response.status_code
        body = _json(response)
        reason = f"{status} {body.get('error') or response.reason_phrase}"
        if status == 200:
            if body.get("ok") and body.get("message_id") is not None:
                return Sent(str(body["message_id"]))
            return Permanent(f"200 without a message id: {body!r}"[:200])
        if status == 429:
            return RetryAfter(_seconds(body.get("retry_after")) or 1.0, reason)
        if status >= 500:
            return RetryAfter(None, reason)
        return Permanent(reason)

    def _url(self, call: str) -> str:
        return f"{self.base_url}/bot{self.token}/{call}"


factory = FakePlatformAdapter


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)
