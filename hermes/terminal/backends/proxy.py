"""The way out of the sandbox and of the agent's browser: an HTTP proxy that connects only
to public addresses.

A sandboxed command with `public` network has no route of its own; its `http_proxy` and
`https_proxy` lead here (through bridge.py inside, to a Unix socket). The agent's browser
is started with this proxy on a loopback port as its only way out (`serve_proxy_tcp`), and
is told each refusal (`Refused`) so the tool can list what the page tried to reach.

`CONNECT host:port` opens a tunnel (HTTPS, git, pip, WebSockets); an absolute-form
request (`GET http://host/path`) is forwarded as one request on a connection that closes
after it, so a kept-alive connection cannot be turned to another host. Every destination
is resolved once, judged by the address rules (hermes.terminal.addresses: never loopback,
private, link-local, the cloud metadata address), and connected to as the literal judged.
A refusal is a 403 whose body says why.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from hermes.terminal.addresses import AddressRefused, AllowList, allowed_addresses

log = logging.getLogger(__name__)

HEAD_LIMIT = 16 * 1024  # a request line and headers, at most
HEAD_SECONDS = 30.0  # for a client to send them
CONNECT_SECONDS = 20.0
MAX_CONNECTIONS = 64  # at once, per command
CHUNK = 65_536
PUBLIC_ONLY = AllowList()


class BadRequest(Exception):
    """What the client sent is not a proxy request this proxy serves."""


@attrs.frozen
class Refused:
    """A connection the proxy refused: where to, and why (the address rules' words)."""

    host: str
    port: int
    why: str


@attrs.frozen
class Policy:
    """What a proxy may reach beyond public addresses (`allow`: the sandbox nothing, the
    browser `web.allow_private`), who is told of each refusal, and what a refusal's answer
    adds for the client that reads it."""

    allow: AllowList = PUBLIC_ONLY
    on_refused: Callable[[Refused], None] | None = None
    note: str = "a sandboxed command reaches public addresses only"


async def serve_proxy(
    path: Path,
    policy: Policy = Policy(),
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on the Unix socket `path` until cancelled, by `policy`'s rules (a sandboxed
    command's: public addresses only; a user's browser: its own; a test: its server)."""
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind(str(path))
    await _serve(listener, policy, lambda: None, task_status)


async def serve_proxy_tcp(
    policy: Policy, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """Listen on a port of 127.0.0.1 the kernel picks (reported to `task_status`) until
    cancelled: for a client that takes a proxy only as host:port (Chromium)."""
    listener = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    await _serve(listener, policy, lambda: port, task_status)


async def _serve(
    listener: trio.socket.SocketType,
    policy: Policy,
    report: Callable[[], object],
    task_status: trio.TaskStatus,
) -> None:
    """Accept on `listener` until cancelled. At most MAX_CONNECTIONS are accepted at once:
    the next waits in the backlog, costing serve no descriptor; whatever one connection
    does, the proxy (and the tree around it) carries on."""
    listener.listen(MAX_CONNECTIONS)
    limit = trio.Semaphore(MAX_CONNECTIONS)
    async with trio.open_nursery() as nursery:
        task_status.started(report())
        with listener:
            while True:
                await limit.acquire()  # before accept: a flood waits in the kernel
                try:
                    sock, _ = await listener.accept()
                except BaseException:
                    limit.release()
                    raise
                nursery.start_soon(_handle, trio.SocketStream(sock), limit, policy)


async def _handle(client: trio.SocketStream, limit: trio.Semaphore, policy: Policy) -> None:
    try:
        async with client:
            await _one(client, policy)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        log.debug("sandbox proxy: %s", exc)
    except Exception:  # one connection's trouble is its own: never the command's
        log.exception("sandbox proxy: a connection failed")
    finally:
        limit.release()


async def _one(client: trio.SocketStream, policy: Policy) -> None:
    try:
        with trio.fail_after(HEAD_SECONDS):
            head, rest = await _read_head(client)
        method, target, version, headers = _parse(head)
        if method == "CONNECT":
            host, port = _split(target, 443)
        else:
            host, port, target = _absolute(target)
    except (BadRequest, trio.TooSlowError) as exc:
        await _answer(client, 400, str(exc) or "the request took too long")
        return
    try:
        with trio.fail_after(CONNECT_SECONDS):
            server = await _connect(host, port, policy.allow)
    except (UnicodeError, ValueError) as exc:  # a name no resolver takes (a long label)
        await _answer(client, 400, f"not a host name: {host!r} ({exc})")
        return
    except AddressRefused as exc:
        if policy.on_refused is not None:
            policy.on_refused(Refused(host, port, str(exc)))
        await _answer(client, 403, f"{exc} ({policy.note})")
        return
    except (OSError, trio.TooSlowError) as exc:
        await _answer(client, 502, f"cannot connect to {host}:{port}: {exc or 'timed out'}")
        return
    async with server:
        if method == "CONNECT":
            await client.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                await server.send_all(rest)
        else:
            kept = [h for h in headers if not h.lower().startswith((b"proxy-", b"connection:"))]
            first = b"%s %s %s\r\n" % (method.encode(), target.encode(), version)
            await server.send_all(first + b"".join(kept) + b"Connection: close\r\n\r\n" + rest)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pipe, client, server, nursery.cancel_scope)
            if method != "CONNECT":  # the client is told not to send another request here
                await _closing_head(server, client, nursery.cancel_scope)
            nursery.start_soon(_pipe, server, client, nursery.cancel_scope)


async def _read_head(stream: trio.SocketStream) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise BadRequest(f"the request's head is over {HEAD_LIMIT} bytes")
        piece = await stream.receive_some(CHUNK)
        if not piece:
            raise BadRequest("the connection closed before the request's head ended")
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    if len(head) > HEAD_LIMIT:
        raise BadRequest(f"the request's head is over {HEAD_LIMIT} bytes")
    return head, rest


def _parse(head: bytes) -> tuple[str, str, bytes, list[bytes]]:
    first, *lines = head.split(b"\r\n")
    parts = first.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("not an HTTP/1.x request line")
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("the request line is not ASCII") from None
    return method.upper(), target, parts[2], [line + b"\r\n" for line in lines if line]


def _split(authority: str, default: int) -> tuple[str, int]:
    host, colon, port = authority.rpartition(":")
    if not colon or "]" in port:  # no port, or the end of a bare IPv6 literal
        host, port = authority, str(default)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadRequest(f"not a host:port: {authority!r}")
    return host, int(port)


def _absolute(target: str) -> tuple[str, int, str]:
    """(host, port, origin-form target) of an absolute-form http:// request target."""
    if not target.lower().startswith("http://"):
        raise BadRequest("only CONNECT and http:// requests go through this proxy")
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    host, port = _split(authority.rpartition("@")[2], 80)
    return host, port, slash + path if slash else "/"


async def _connect(host: str, port: int, allow: AllowList) -> trio.SocketStream:
    failure: OSError | None = None
    for literal in await allowed_addresses(host, port, allow):
        try:
            return await trio.open_tcp_stream(literal, port)
        except OSError as exc:
            failure = exc
    raise failure or OSError(f"{host} has no address")


async def _answer(stream: trio.SocketStream, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    await stream.send_all(
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (status, reason.encode(), len(body), body)
    )


async def _closing_head(
    server: trio.SocketStream, client: trio.SocketStream, both: trio.CancelScope
) -> None:
    """The response's head to the client with `Connection: close` (its own connection
    headers dropped): a connection judged for one host carries one exchange, so a client
    that keeps connections alive never sends another site's request (its cookies) to a
    server that held this one open."""
    try:
        head, rest = await _read_head(server)
    except (BadRequest, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        both.cancel()
        return
    lines = head.split(b"\r\n")
    kept = [h for h in lines[1:] if not h.lower().startswith((b"connection:", b"keep-alive:"))]
    try:
        await client.send_all(b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n")
        if rest:
            await client.send_all(rest)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        both.cancel()


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream, both: trio.CancelScope) -> None:
    """Copy until `source` ends, then end `sink`'s sending side (the other way goes on)."""
    try:
        while piece := await source.receive_some(CHUNK):
            await sink.send_all(piece)
        await sink.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        both.cancel()
