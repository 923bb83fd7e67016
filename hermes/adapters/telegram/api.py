"""The Bot API's calls and answers: `{base}/bot{TOKEN}/{method}`, JSON in, and
`{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
"parameters": {"retry_after" | "migrate_to_chat_id"}}` out.

The token is part of every URL: httpx's request logging is kept at WARNING by
the CLI, and nothing here puts a URL in an error message.
"""

from __future__ import annotations

from typing import Any

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.http import HttpAnswer, JsonRequests
from hermes.adapters.refusals import Refusal, retry_after

DEFAULT_BASE = "https://api.telegram.org"


class ApiError(HermesError):
    """The Bot API said no."""

    def __init__(
        self,
        method: str,
        status: int,
        description: str,
        retry_after: float | None = None,
        migrate_to: str | None = None,
    ) -> None:
        super().__init__(f"{method}: {status} {description}")
        self.method = method
        self.status = status
        self.description = description
        self.retry_after = retry_after
        self.migrate_to = migrate_to


class BotApi:
    """Calls on one httpx client (the poll and the sends each keep their own)."""

    def __init__(self, http: httpx.AsyncClient, base: str, token: str) -> None:
        self.http = http
        self.requests = JsonRequests(http)
        self.base = base.rstrip("/")
        self.token = token

    def url(self, method: str) -> str:
        return f"{self.base}/bot{self.token}/{method}"

    async def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> Any:
        """The call's `result`; ApiError for a refusal. httpx's errors pass through."""
        request = self.requests.post(self.url(method), params or {}, timeout)
        return answered(method, HttpAnswer.of(await self.http.send(request)))

    def file_url(self, file_path: str) -> str:
        """Where a file (`getFile`'s file_path) is downloaded."""
        return f"{self.base}/file/bot{self.token}/{file_path}"


def answered(method: str, answer: HttpAnswer) -> Any:
    """The `result` of an answer that says `ok`; ApiError for anything else (a 200 whose
    body cannot be read too: its status is then 200)."""
    body = answer.body if isinstance(answer.body, dict) else {}
    if answer.status == 200 and body.get("ok"):
        return body.get("result")
    parameters = body.get("parameters") or {}
    migrate = parameters.get("migrate_to_chat_id")
    raise ApiError(
        method,
        int(body.get("error_code") or answer.status),
        str(body.get("description") or "no description")[:300],
        retry_after(answer.headers, parameters.get("retry_after")),
        str(migrate) if migrate is not None else None,
    )


def refusal_of(exc: ApiError) -> Refusal:
    """A refused call as refusals.py reads every platform's (Telegram's words are in the
    description)."""
    return Refusal(exc.status, "", f"{exc.status} {exc.description}", exc.retry_after)
