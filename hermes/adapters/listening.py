"""An ASGI app served on `host`:`port` by hypercorn's Trio worker, in an actor's nursery:
the one way hermes listens over HTTP (the webhook listener, the API, the operator
surfaces); and what a small ASGI app of hermes's own needs of the protocol (its
lifespan, the request's headers, a body read up to a cap, a whole answer)."""

from __future__ import annotations

import errno
import logging
from typing import Any

import trio
from hypercorn.config import Config as HttpConfig
from hypercorn.trio import serve

from hermes.actors.errors import PortInUse


async def listen(
    nursery: trio.Nursery, app: Any, host: str, port: int, key: str, logger: str
) -> int:
    """Serve `app` until the nursery ends; the port bound (`port` 0: a free one). A port
    taken is PortInUse, naming `key`, the setting that chooses another."""
    config = HttpConfig()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger(logger)
    config.graceful_timeout = 1.0
    try:
        bound = await nursery.start(serve, app, config)
    except* OSError as group:  # hypercorn binds inside a nursery of its own
        if group.subgroup(lambda e: getattr(e, "errno", None) == errno.EADDRINUSE):
            raise PortInUse(host, port, key) from None
        raise
    return int(bound[0].rsplit(":", 1)[1])


async def not_http(scope: dict[str, Any], receive: Any, send: Any) -> bool:
    """Whether `scope` is none of an app's business: its lifespan (answered here, until
    the server shuts down) or anything but a plain HTTP request."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return True
    return scope["type"] != "http"


async def read_body(receive: Any, cap: int) -> bytes | None:
    """A request's body, None past `cap` bytes (not read further)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def headers_of(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers, names lower-cased (the last of a repeated one)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def respond(
    send: Any,
    status: int,
    body: bytes,
    content_type: str,
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """A whole answer: its status, its body with its type and length, and `extra` headers."""
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers + list(extra)})
    await send({"type": "http.response.body", "body": body})
