"""A JSON-RPC client of the local endpoint: `hermes chat`, and actions sent to serve."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from hermes.actors.errors import HermesError
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.wire import error_from_json, operation, result_from_json, result_to_json


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
            port = int(home.serve_port.read_text())
        except (FileNotFoundError, ValueError):
            port = config.gateway.local.port
    return f"ws://{config.gateway.local.host}:{port}/", token


class Rpc:
    """Calls over one connection, and what serve pushes meanwhile: a task reads every
    message as it comes (`read`), so a push (a cron brief, a turn's steps) reaches
    `on_notify` while no call is waiting, and each answer its own call."""

    def __init__(self, ws: WebSocketConnection, on_notify: Callable[[dict], None] | None) -> None:
        self.ws = ws
        self.on_notify = on_notify
        self.ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict]] = {}
        self._closed: EndpointError | None = None

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        if self._closed is not None:
            raise self._closed
        request_id = next(self.ids)
        send, answers = trio.open_memory_channel[dict](1)
        self._waiting[request_id] = send
        try:
            await self.ws.send_message(
                json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
            msg = await answers.receive()
        except (ConnectionClosed, trio.EndOfChannel):
            raise self._closed or EndpointError(CLOSED) from None
        finally:
            self._waiting.pop(request_id, None)
        if "error" in msg:
            raise error_from_json(msg["error"]["message"], msg["error"].get("data"))
        return msg["result"]

    async def read(self) -> None:
        """Every message until serve closes the connection: answers to their calls,
        pushes to `on_notify`."""
        try:
            while True:
                try:
                    msg = json.loads(await self.ws.get_message())
                except ValueError:
                    continue  # not JSON: nothing of ours
                waiting = self._waiting.get(msg.get("id")) if "id" in msg else None
                if waiting is not None:
                    waiting.send_nowait(msg)
                elif "method" in msg and self.on_notify is not None:
                    self.on_notify(msg)
        except ConnectionClosed:
            self._closed = EndpointError(CLOSED)
            for waiting in self._waiting.values():
                waiting.close()


CLOSED = "serve closed the connection (it is stopping?)"


@asynccontextmanager
async def connect(
    url: str, token: str, on_notify: Callable[[dict], None] | None = None
) -> AsyncIterator[Rpc]:
    """A connection to serve's endpoint for the block; `on_notify` gets what serve pushes.
    An error of the block comes out as itself, not inside the connection's task group."""
    headers = [(b"authorization", f"Bearer {token}".encode())]
    try:
        try:
            async with open_websocket_url(url, extra_headers=headers, connect_timeout=10) as ws:
                async with trio.open_nursery() as nursery:
                    rpc = Rpc(ws, on_notify)
                    nursery.start_soon(rpc.read)
                    try:
                        yield rpc
                    finally:
                        nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            leaf = _only(group)
            if leaf is None:
                raise
            raise leaf from None
    except HandshakeError as exc:
        # trio-websocket wraps a refused or failed connect in an empty HandshakeError
        if isinstance(exc.__cause__, OSError):
            raise EndpointError(_unreachable(url, exc.__cause__)) from None
        raise EndpointError(
            f"{url} refused the connection: {exc or 'the handshake failed'}"
            " (is serve.token this serve's?)"
        ) from None
    except OSError as exc:
        raise EndpointError(_unreachable(url, exc)) from None


def _only(group: BaseExceptionGroup) -> BaseException | None:
    """The one exception inside nested groups, if there is only one."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup):
        if len(inner.exceptions) != 1:
            return None
        inner = inner.exceptions[0]
    return inner


def _unreachable(url: str, exc: OSError) -> str:
    return f"cannot reach {url}: {exc}; is `hermes serve` running? (start it: hermes serve)"


async def ask_serve(
    home: HermesHome, config: Config, name: str, args: Any, port: int | None = None
) -> Any:
    """The action run by the serve of this home, its answer read back into its type."""
    op = operation(name)
    url, token = serve_address(home, config, port)
    async with connect(url, token) as rpc:
        answer = await rpc.call(name, result_to_json(args))
    return result_from_json(op, answer)
