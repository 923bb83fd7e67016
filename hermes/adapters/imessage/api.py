"""The BlueBubbles server's REST API: `{base}/api/v1/...?password=<server password>`, JSON
in and out, every answer `{"status", "message", "data"}` (an error adds `"error": {"type",
"message"}`). The password travels in the query, so a URL is never logged nor put in an
error: what is said names the route alone."""

from __future__ import annotations

from typing import Any

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.http import HttpAnswer
from hermes.adapters.refusals import Codes, Refusal, retry_after

CODES = Codes(auth=frozenset({"Unauthorized"}))
PAGE = 100  # messages a catch-up query asks for at once


class BlueBubblesError(HermesError):
    """The server said no: its refusal (status, error type, what it said)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


def api_url(base: str, path: str, password: str) -> str:
    """The route's URL with the password (`httpx.URL` quotes it)."""
    url = httpx.URL(base.rstrip("/") + "/api/v1/" + path.lstrip("/"))
    return str(url.copy_merge_params({"password": password}))


def refusal_of(answer: HttpAnswer, what: str) -> Refusal | None:
    """None when the server took the call (a 2xx), else what it said."""
    if 200 <= answer.status < 300:
        return None
    body = answer.body if isinstance(answer.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    code = str(body.get("message") or "")[:100]
    said = str(error.get("message") or error.get("type") or "")[:200]
    reason = f"{what}: HTTP {answer.status}" + (f" {code}" if code else "")
    reason += f" ({said})" if said else ""
    wait = retry_after(answer.headers) if answer.status == 429 else None
    return Refusal(answer.status, code, reason, wait)


async def call(
    http: httpx.AsyncClient,
    base: str,
    password: str,
    path: str,
    body: dict[str, Any] | None = None,
) -> Any:
    """A GET (or a POST of `body`): the answer's `data`; BlueBubblesError for anything but
    a 2xx. httpx's errors pass."""
    url = api_url(base, path, password)
    response = await (http.get(url) if body is None else http.post(url, json=body))
    answer = HttpAnswer.of(response)
    refusal = refusal_of(answer, f"{'GET' if body is None else 'POST'} {path}")
    if refusal is not None:
        raise BlueBubblesError(refusal)
    return answer.body.get("data") if isinstance(answer.body, dict) else None


def query(
    after: int, offset: int = 0, chat: str | None = None, limit: int = PAGE
) -> dict[str, Any]:
    """A message query's body: messages created after `after` (ms), oldest first, with
    their chat, sender and attachments (`chat`: of one chat only)."""
    body: dict[str, Any] = {
        "after": after,
        "sort": "ASC",
        "limit": limit,
        "offset": offset,
        "with": ["chat", "handle", "attachment"],
    }
    if chat is not None:
        body["chatGuid"] = chat
    return body
