"""An ASGI app served on `host`:`port` by hypercorn's Trio worker, in an actor's nursery:
the one way hermes listens over HTTP (the webhook listener, the operator surfaces)."""

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
