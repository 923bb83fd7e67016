"""Slack's Web API: `{base}/api/{method}` with a bearer token, JSON in, and
`{"ok": true, ...}` or `{"ok": false, "error": "..."}` out (HTTP 200 either way);
a rate limit is HTTP 429 with a `Retry-After` header. Tokens travel in headers
only, never in a URL or an error message."""

from __future__ import annotations

from typing import Any

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.http import HttpAnswer
from hermes.adapters.refusals import Refusal, retry_after

DEFAULT_BASE = "https://slack.com"


class SlackError(HermesError):
    """The Web API said no: `error` is Slack's code (channel_not_found, ratelimited...)."""

    def __init__(
        self, method: str, error: str, status: int = 200, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{method}: {error}" + (f" (HTTP {status})" if status != 200 else ""))
        self.method = method
        self.error = error
        self.status = status
        self.retry_after = retry_after


def web_api_url(base: str, method: str) -> str:
    return base.rstrip("/") + "/api/" + method


class WebApi:
    def __init__(self, http: httpx.AsyncClient, base: str, token: str) -> None:
        self.http = http
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The answer of an `ok` call; SlackError otherwise. httpx's errors pass through."""
        response = await self.http.post(
            web_api_url(self.base, method), json=params or {}, headers=self.headers
        )
        if response.status_code == 429:
            raise SlackError(method, "ratelimited", 429, retry_after(response.headers))
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SlackError(method, "invalid_response", response.status_code)
        if response.status_code >= 500 or not body.get("ok"):
            raise SlackError(
                method, str(body.get("error") or "unknown_error")[:100], response.status_code
            )
        return body


def refusal_of(answer: HttpAnswer, method: str) -> Refusal | None:
    """None when Slack took the call (HTTP 200 and `ok`), else what it said: its `error`
    (a 429 is `ratelimited`, with its Retry-After)."""
    if answer.status == 429:
        wait = retry_after(answer.headers)
        return Refusal(429, "ratelimited", f"{method}: ratelimited (HTTP 429)", wait)
    body = answer.body if isinstance(answer.body, dict) else {"error": "invalid_response"}
    if answer.status < 500 and body.get("ok"):
        return None
    error = str(body.get("error") or "unknown_error")[:100]
    reason = f"{method}: {error}" + (f" (HTTP {answer.status})" if answer.status != 200 else "")
    return Refusal(answer.status, error, reason)
