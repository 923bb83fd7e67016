"""The local endpoint: JSON-RPC 2.0 over WebSocket on 127.0.0.1.

Every connection presents the token from HERMES_HOME/serve.token in an
`Authorization: Bearer` header; anything else is refused before the
WebSocket opens. Malformed JSON, unknown methods and bad params get JSON-RPC
errors and the connection lives on; a frame over 1 MiB is refused (the
connection is closed with 1009). What the methods do is the gateway's
business: this actor only speaks the protocol.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, serve_websocket

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.adapters import jsonrpc
from hermes.adapters.jsonrpc import INTERNAL_ERROR, RpcError

log = logging.getLogger(__name__)

MAX_FRAME = 1024 * 1024


class Client:
    """One authenticated connection, as the gateway's methods see it."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.sessions: set[str] = set()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send(jsonrpc.notification(method, params))

    async def send(self, text: str) -> None:
        await self.ws.send_message(text)  # trio-websocket serializes concurrent sends itself


Handler = Callable[[Client, str, dict[str, Any]], Awaitable[Any]]


@attrs.frozen
class EndpointHandle:
    """What the endpoint hands out when ready: its address and the port it bound."""

    address: Address
    port: int


@attrs.frozen
class Deliver:
    """Push a message to every client following `session_id`; replies the count reached."""

    session_id: str
    method: str
    params: dict[str, Any]


class LocalEndpoint(Actor):
    def __init__(
        self,
        host: str,
        port: int,
        token: str,
        handler: Handler,
        on_bound: Callable[[int], None] = lambda port: None,
        name: str = "local",
    ) -> None:
        super().__init__(name)
        self.host = host
        self.port = port
        self.token = token
        self.handler = handler
        self.on_bound = on_bound
        self.clients: set[Client] = set()

    async def on_start(self) -> None:
        if isinstance(self.handler, contextlib.AbstractAsyncContextManager):
            await self.exits.enter_async_context(self.handler)  # what the methods hold open
        server = await self.nursery.start(
            lambda task_status: serve_websocket(
                self._connection, self.host, self.port, None,
                handler_nursery=self.nursery, max_message_size=MAX_FRAME, task_status=task_status,
            )
        )  # fmt: skip
        self.port = server.port
        self.on_bound(self.port)

    def ready_handle(self) -> EndpointHandle:
        return EndpointHandle(self.address, self.port)

    def stop_intake(self) -> None:
        """Cron briefs reach clients until the endpoint itself is stopped, after the
        scheduler and the gateway (its connections live until then too)."""

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Deliver):
            reached = 0
            for client in list(self.clients):
                if msg.session_id in client.sessions:
                    try:
                        await client.notify(msg.method, msg.params)
                        reached += 1
                    except ConnectionClosed:
                        self.clients.discard(client)
            return reached
        raise TypeError(f"the local endpoint cannot handle {type(msg).__name__}")

    def _authorized(self, request: WebSocketRequest) -> bool:
        for key, value in request.headers:
            if key.lower() == b"authorization":
                given = value.decode(errors="replace").removeprefix("Bearer ").strip()
                return hmac.compare_digest(given.encode(), self.token.encode())
        return False

    async def _connection(self, request: WebSocketRequest) -> None:
        if not self._authorized(request):
            await request.reject(403, body=b"a valid token from serve.token is required\n")
            return
        client = Client(await request.accept())
        self.clients.add(client)
        try:
            async with trio.open_nursery() as calls:
                await self._read(client, calls)
        except* ConnectionClosed:
            pass  # the client went away; its calls were cancelled with it
        except* Exception as group:  # one connection's trouble never takes the endpoint down
            log.error("local endpoint connection failed: %r", group.exceptions)
        finally:
            self.clients.discard(client)

    async def _read(self, client: Client, calls: trio.Nursery) -> None:
        while True:
            text = await client.ws.get_message()
            try:
                req = jsonrpc.parse(text)
            except RpcError as exc:
                await client.send(jsonrpc.error(None, exc))
                continue
            calls.start_soon(self._call, client, req)

    async def _call(self, client: Client, req: jsonrpc.Request) -> None:
        try:
            value = await self.handler(client, req.method, req.params)
            reply = jsonrpc.result(req.id, value)
        except ConnectionClosed:
            return  # the client left while its call ran (a turn streaming): not an error
        except RpcError as exc:
            reply = jsonrpc.error(req.id, exc)
        except Exception as exc:  # a bug in one method must not end the connection
            log.exception("local endpoint: %s failed", req.method)
            reply = jsonrpc.error(req.id, RpcError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
        if req.id is not None:
            try:
                await client.send(reply)
            except ConnectionClosed:
                pass
