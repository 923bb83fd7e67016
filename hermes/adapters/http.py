"""The base of every adapter spoken over HTTP: one client, one send deadline, one way to
read what came back.

The client is opened with the actor (its auth headers from `headers()`) and
has no read timeout of its own: a send's one limit is the contract's
SEND_DEADLINE, which the adapter base keeps; only connecting is bounded here,
so a request that never left is told from one that may have arrived. `post`
turns a transport failure into its send result (`failed_send`) and anything
the platform answered into an `HttpAnswer`, which the platform's own table
reads into a SendResult.

A send is the hot path (one per chunk), and so is a long poll (one per batch of
updates): `JsonRequests` builds their requests itself, with the client's headers
merged once and each URL parsed once, for `client.send`; httpx's
per-request merging of URL, headers, cookies and parameters was about a fifth of
a send's CPU. They carry no cookies (the platforms' APIs authenticate by token).
"""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Any

import attrs
import httpx
import trio

from hermes.adapters.base import C, PlatformAdapter
from hermes.adapters.contract import (
    OutFile,
    RetryAfter,
    SendResult,
    Unconfirmed,
    file_gone,
)

CONNECT_TIMEOUT = 10.0
TIMEOUT = httpx.Timeout(None, connect=CONNECT_TIMEOUT)
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def failed_send(exc: httpx.HTTPError) -> SendResult:
    """A request that never left (no connection) goes again; one that may have reached
    the platform is Unconfirmed, so a platform that does not deduplicate never gets it
    twice."""
    if isinstance(exc, NOT_SENT):
        return RetryAfter(None, f"not sent: {type(exc).__name__}")
    return Unconfirmed(f"no answer: {type(exc).__name__}")


@attrs.frozen
class HttpAnswer:
    """What the platform answered: its status, its JSON body (None when it sent none or
    something else), its headers."""

    status: int
    body: Any
    headers: httpx.Headers

    @classmethod
    def of(cls, response: httpx.Response) -> HttpAnswer:
        try:
            body = response.json()
        except ValueError:
            body = None
        return cls(response.status_code, body, response.headers)


class JsonRequests:
    """POSTs (or another `method`) with a JSON body on one client, built the lean way (see
    the module)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.headers = httpx.Headers(client.headers)
        self.headers["content-type"] = "application/json"

    def post(
        self, url: str, body: dict[str, Any], timeout: float | None = None, *, method: str = "POST"
    ) -> httpx.Request:
        """The request (`method`: POST, or another verb a platform's API uses, such as
        PATCH); `timeout` (seconds) replaces the client's for every phase (the client's
        own are set by `client.send`)."""
        limits = None if timeout is None else {"timeout": httpx.Timeout(timeout).as_dict()}
        return httpx.Request(
            method, _url(url), headers=self.headers, content=_json(body), extensions=limits
        )


class HttpAdapter(PlatformAdapter[C]):
    """A platform adapter with one HTTP client for its calls and sends."""

    http: httpx.AsyncClient | None = None

    def headers(self) -> dict[str, str]:
        """Headers every request carries (a bearer token); none by default."""
        return {}

    _requests: JsonRequests | None = None

    async def on_start(self) -> None:
        client = httpx.AsyncClient(timeout=TIMEOUT, headers=self.headers())
        self.http = await self.exits.enter_async_context(client)
        self._requests = JsonRequests(self.http)
        await super().on_start()

    async def post(
        self, url: str, body: dict[str, Any], *, method: str = "POST"
    ) -> HttpAnswer | SendResult:
        """A send's request (`method`: an edit's PATCH): the platform's answer, or the
        result of a request that failed on the way (never left: retry; may have arrived:
        unconfirmed)."""
        if self.http is None or self._requests is None:
            return RetryAfter(None, "the adapter is not started")
        request = self._requests.post(url, body, method=method)
        try:
            return HttpAnswer.of(await self.http.send(request))
        except httpx.HTTPError as exc:
            return failed_send(exc)

    async def upload(
        self,
        url: str,
        fields: dict[str, str],
        files: dict[str, OutFile],
        headers: dict[str, str] | None = None,
    ) -> HttpAnswer | SendResult:
        """A multipart send of `files` (by field name, each streamed from hermes's copy,
        never read whole) beside the text `fields`; answered as `post`'s."""
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        with contextlib.ExitStack() as opened:
            try:
                parts = {}
                for field, f in files.items():
                    handle = await trio.to_thread.run_sync(open, f.path, "rb")
                    parts[field] = (f.name, opened.enter_context(handle), f.mime)
            except OSError as exc:  # its copy is gone: it can never be sent
                return file_gone(exc)
            try:
                answer = await self.http.post(url, data=fields, files=parts, headers=headers)
            except httpx.HTTPError as exc:
                return failed_send(exc)
        return HttpAnswer.of(answer)


async def read_capped(response: httpx.Response, limit: int) -> bytes | None:
    """A streamed response's body, never more than `limit` bytes of it held: None past
    it (what is outside the machine sends as much as it likes)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


@functools.lru_cache(maxsize=1024)
def _url(url: str) -> httpx.URL:
    """A send's URL, parsed once (a platform posts to few of them)."""
    return httpx.URL(url)


def _json(body: dict[str, Any]) -> bytes:
    """The body as httpx's `json=` would send it."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
