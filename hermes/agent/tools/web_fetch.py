"""web_fetch: GET a web page (or a text, JSON, XML or PDF document) and read it as text.

Bounded every way: at most MAX_REDIRECTS redirects, MAX_BYTES of body (decoded, read as
it streams in, never more held), FETCH_SECONDS for the whole fetch (every hop, every
byte). Every connection goes through the address guard (hermes.agent.web.addresses),
so a URL cannot reach loopback, the LAN or the cloud metadata address unless an owner
listed it in `web.allow_private`; no environment proxy is used, as one would bypass it.
"""

from __future__ import annotations

import functools
import json
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
import httpcore
import httpx
import trio

from hermes.agent.tools.base import ToolContext, ToolError, capped, need, obj
from hermes.agent.web.addresses import GuardedBackend
from hermes.agent.web.readable import Page, kind_of, readable
from hermes.terminal.addresses import AllowList

T = TypeVar("T")

MAX_REDIRECTS = 5
MAX_BYTES = 10 * 1024 * 1024
FETCH_SECONDS = 20.0
EXTRACT_SECONDS = 30.0  # reading the text out of a fetched body (a pathological PDF)
EXTRACT_THREADS = 2  # bodies read at once, given-up ones included
FORMATS = ("markdown", "text")
USER_AGENT = "Mozilla/5.0 (compatible; hermes-web-fetch/1)"
HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
)


@functools.cache
def tls() -> ssl.SSLContext:
    """One verifying TLS context for every fetch (building one reads the CA bundle)."""
    return httpx.create_ssl_context(trust_env=False)


def described(exc: BaseException) -> str:
    """The first message along `exc`'s causes: httpcore wraps Trio's errors, which wrap
    OpenSSL's (a certificate that does not verify has its reason only there)."""
    cause: BaseException | None = exc
    while cause is not None:
        if str(cause):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__


@contextmanager
def transport_errors() -> Iterator[None]:
    """httpcore's errors as httpx's, as httpx's own transport reports them."""
    try:
        yield
    except HTTPCORE_ERRORS as exc:
        raise httpx.TransportError(described(exc)) from exc


class CoreStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with transport_errors():
            async for part in self.stream:
                yield part

    async def aclose(self) -> None:
        await self.stream.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx over an httpcore pool on the guarded backend. httpx's own transport takes no
    network backend (0.28/0.29), so this is its request/response mapping on a pool that
    does; keep-alive off, so no connection outlives the response it carried."""

    def __init__(self, allow: AllowList) -> None:
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=tls(),
            max_keepalive_connections=0,
            network_backend=GuardedBackend(allow),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with transport_errors():
            response = await self.pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=CoreStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


@attrs.frozen
class Fetched:
    url: str
    status: int
    media_type: str
    kind: str
    charset: str | None
    body: bytes


def checked_url(url: httpx.URL) -> httpx.URL:
    if url.scheme not in ("http", "https"):
        raise ToolError(f"web_fetch reads http:// and https:// URLs only, not {str(url)!r}")
    if not url.host:
        raise ToolError(f"{str(url)!r} names no host")
    return url


def media_type_of(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_body(response: httpx.Response) -> bytes:
    """The body, decoded from gzip/deflate, at most MAX_BYTES of it ever held (a small
    compressed body can stand for a huge one: it is inflated only up to the cap)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)  # a gzip or zlib header
    elif encoding not in ("", "identity"):
        raise ToolError(f"the server sent the body in {encoding!r} encoding, unreadable here")
    else:
        inflate = None
    body = bytearray()
    async for chunk in response.aiter_raw():
        if inflate is not None:
            try:
                chunk = inflate.decompress(chunk, MAX_BYTES - len(body) + 1)
            except zlib.error as exc:
                raise ToolError(f"the server's {encoding} body is corrupt: {exc}") from exc
        if len(body) + len(chunk) > MAX_BYTES:
            raise ToolError(f"the body is larger than the {MAX_BYTES // 2**20} MB limit")
        body += chunk
    return bytes(body)


async def fetch(url: str, allow: AllowList) -> Fetched:
    """GET `url`, following up to MAX_REDIRECTS redirects, within FETCH_SECONDS."""
    try:
        first = checked_url(httpx.URL(url))
    except httpx.InvalidURL as exc:
        raise ToolError(f"not a URL: {url!r} ({exc})") from exc
    headers = {"user-agent": USER_AGENT, "accept-encoding": "gzip"}
    async with httpx.AsyncClient(
        transport=GuardedTransport(allow),
        trust_env=False,  # an environment proxy would connect for us, past the guard
        timeout=None,  # the one deadline is FETCH_SECONDS, over the whole fetch
        headers=headers,
    ) as client:
        with trio.move_on_after(FETCH_SECONDS):
            return await follow(client, client.build_request("GET", first))
    raise ToolError(f"the fetch took longer than the {FETCH_SECONDS:g} s limit")


async def follow(
    client: httpx.AsyncClient,
    request: httpx.Request,
    final: Callable[[httpx.Response], Awaitable[T]] | None = None,
) -> T | Fetched:
    """`request`, its redirects followed (each checked again), up to MAX_REDIRECTS; the
    final response given to `final` (default: `answer`, a page read into memory)."""
    for hop in range(MAX_REDIRECTS + 1):
        try:
            response = await client.send(request, stream=True)
            try:
                if response.next_request is None:
                    return await (final or answer)(response)
            finally:
                await response.aclose()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(f"could not fetch {request.url}: {exc}") from exc
        if hop == MAX_REDIRECTS:
            raise ToolError(f"more than {MAX_REDIRECTS} redirects (the limit), at {request.url}")
        request = response.next_request
        checked_url(request.url)
    raise AssertionError("unreachable: the last hop returns or raises")


async def answer(response: httpx.Response) -> Fetched:
    """The final response, its body read if web_fetch reads its content type."""
    media_type = media_type_of(response)
    kind = kind_of(media_type)
    if kind is None:
        raise ToolError(
            f"{response.url} is {media_type or 'of no stated content type'}, which web_fetch "
            "does not read (it reads HTML, text, JSON, XML and PDF)"
        )
    body = await read_body(response)
    return Fetched(
        str(response.url), response.status_code, media_type, kind, response.charset_encoding, body
    )


@attrs.frozen
class WebFetchTool:
    name = "web_fetch"
    description = (
        "Fetch a web page or document (http/https) and read it as text: an HTML page's "
        "main content as Markdown (or plain text), a PDF's text, text/JSON/XML as is. "
        "Local and private network addresses are refused."
    )
    parameters = obj(
        ["url"],
        url={"type": "string"},
        format={
            "type": "string",
            "enum": list(FORMATS),
            "description": "for HTML: markdown (default, links kept) or text",
        },
    )
    allow_private: AllowList = attrs.field(default=(), converter=AllowList.parse)
    extracting: trio.CapacityLimiter = attrs.field(
        factory=lambda: trio.CapacityLimiter(EXTRACT_THREADS), eq=False, repr=False
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        url = need(args, "url")
        form = args.get("format") or "markdown"
        if form not in FORMATS:
            raise ToolError(f"format must be one of {', '.join(FORMATS)}, not {form!r}")
        fetched = await fetch(str(url), self.allow_private)
        ctx.took_in(f"web_fetch of {httpx.URL(fetched.url).host}")  # a page: anyone's words

        def read() -> tuple[Page, str]:
            page = readable(
                fetched.kind,
                fetched.body,
                fetched.charset,
                fetched.url,
                markdown=form == "markdown",
            )
            return page, capped(page.text, ctx)

        # Extraction is CPU-bound and `capped` may spill megabytes to a file: off the
        # Trio thread, and a stopped turn does not wait for a big PDF's text. A thread
        # cannot be stopped: one past EXTRACT_SECONDS is left to finish on its own,
        # holding one of the tool's few places, never the threads the rest of serve uses.
        with trio.move_on_after(EXTRACT_SECONDS):
            page, text = await trio.to_thread.run_sync(
                read, abandon_on_cancel=True, limiter=self.extracting
            )
            return json.dumps(
                {
                    "url": fetched.url,
                    "status": fetched.status,
                    "content_type": fetched.media_type,
                    **({"title": page.title} if page.title else {}),
                    "text": text,
                }
            )
        raise ToolError(
            f"reading {fetched.url} ({fetched.media_type}) took longer than"
            f" {EXTRACT_SECONDS:g} s; it was given up"
        )
