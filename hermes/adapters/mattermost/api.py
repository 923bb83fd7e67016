"""Mattermost's REST API v4: `{base}/api/v4/...` with the bot's token as a bearer, JSON
in and out. An error is `{"id": "api.context.session_expired.app_error", "message":
..., "status_code": 401}`; a rate limit is HTTP 429 with `X-Ratelimit-Reset` (seconds
until the window resets). The token travels in a header only, never in a URL or an
error message."""

from __future__ import annotations

import email.utils
from typing import Any

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.http import HttpAnswer
from hermes.adapters.refusals import Codes, Refusal, retry_after

SESSION_EXPIRED = "api.context.session_expired.app_error"
CODES = Codes(
    auth=frozenset({SESSION_EXPIRED, "api.context.invalid_token.error"}),
    # an edit of a post that is gone, not the bot's, or past the server's edit time limit
    gone=frozenset(
        {
            "app.post.get.app_error",
            "store.sql_post.get.app_error",
            "api.context.permissions.app_error",
            "api.post.update_post.permissions_time_limit.app_error",
        }
    ),
)


class MattermostError(HermesError):
    """The API said no: `status` and Mattermost's error `id`; `wait` a 429's reset."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


def api_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/api/v4/" + path.lstrip("/")


def socket_url(base: str) -> str:
    """The WebSocket's address on the same server (ws:// for http://, wss:// for https://)."""
    return "ws" + api_url(base, "websocket").removeprefix("http")


def wait_of(headers: httpx.Headers) -> float | None:
    """A 429's wait: X-Ratelimit-Reset's seconds, else Retry-After's."""
    reset = headers.get("x-ratelimit-reset")
    return retry_after({"retry-after": reset} if reset else headers)


def refusal_of(answer: HttpAnswer, what: str) -> Refusal | None:
    """None when Mattermost took the call (a 2xx), else what it said."""
    if 200 <= answer.status < 300:
        return None
    body = answer.body if isinstance(answer.body, dict) else {}
    code = str(body.get("id") or "")[:100]
    said = str(body.get("message") or "")[:200]
    reason = f"{what}: HTTP {answer.status}" + (f" {code}" if code else "")
    reason += f" ({said})" if said else ""
    wait = wait_of(answer.headers) if answer.status == 429 else None
    return Refusal(answer.status, code, reason, wait)


def server_ms(headers: httpx.Headers) -> int | None:
    """The server's time (ms) by an answer's Date header (to its second); None without
    one."""
    try:
        return int(email.utils.parsedate_to_datetime(headers["date"]).timestamp() * 1000)
    except (KeyError, TypeError, ValueError):
        return None


async def get(http: httpx.AsyncClient, base: str, path: str, **params: Any) -> HttpAnswer:
    """A GET's answer; MattermostError for anything but a 200. httpx's errors pass."""
    response = await http.get(api_url(base, path), params=params or None)
    answer = HttpAnswer.of(response)
    refusal = refusal_of(answer, f"GET {path.split('?')[0]}")
    if refusal is not None:
        raise MattermostError(refusal)
    return answer
