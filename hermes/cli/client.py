"""A JSON-RPC client of the local endpoint: `hermes chat`, and actions sent to serve."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from trio_websocket import (
    ConnectionClosed,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from hermes.actors.errors import HermesError
from hermes.config import Config
from hermes.home import HermesHome
from hermes.operations.wire import error_from_json


class EndpointError(HermesError):
    """The endpoint could not be reached or refused us (it answers errors as themselves)."""


def serve_address(home: HermesHome, config: Config, port: int | None) -> tuple[str, str]:
    """The running serve's endpoint URL (its port from serve.port unless given) and token."""
    try:
        token = home.serve_token.read_text().strip()
    except FileNotFoundError:
        raise EndpointError(f"no {home.serve_token}: start `hermes serve` first") from None
    if port is None:
        try:
            port = int((home.root / "serve.port").read_text())
        except (FileNotFoundError, ValueError):
            port = config.gateway.local.port
    return f"ws://{config.gateway.local.host}:{port}/", token


class Rpc:
    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(
        self, method: str, params: dict[str, Any], on_notify: Callable[[dict], None] | None = None
    ) -> Any:
        request_id = next(self.ids)
        try:
            await self.ws.send_message(
                json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            return await self._reply(request_id, on_notify)
        except ConnectionClosed:
            raise EndpointError("serve closed the connection (it is stopping?)") from None

    async def _reply(self, request_id: int, on_notify: Callable[[dict], None] | None) -> Any:
        while True:
            msg = json.loads(await self.ws.get_message())
            if msg.get("id") == request_id:
                if "error" in msg:
                    raise error_from_json(msg["error"]["message"], msg["error"].get("data"))
                return msg["result"]
            if "method" in msg and on_notify is not None:
                on_notify(msg)


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Rpc]:
    headers = [(b"authorization", f"Bearer {token}".encode())]
    try:
        async with open_websocket_url(url, extra_headers=headers, connect_timeout=10) as ws:
            yield Rpc(ws)
    except HandshakeError as exc:
        # trio-websocket wraps a refused or failed connect in an empty HandshakeError
        if isinstance(exc.__cause__, OSError):
            raise EndpointError(_unreachable(url, exc.__cause__)) from None
        raise EndpointError(f"{url} refused the connection: {exc or 'the handshake failed'}"
                            " (is serve.token this serve's?)") from None  # fmt: skip
    except OSError as exc:
        raise EndpointError(_unreachable(url, exc)) from None


def _unreachable(url: str, exc: OSError) -> str:
    return f"cannot reach {url}: {exc}; is `hermes serve` running? (start it: hermes serve)"
