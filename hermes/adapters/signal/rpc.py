"""signal-cli's JSON-RPC, as its daemon serves it, from Trio.

- HTTP (`daemon --http`): a call is `POST /api/v1/rpc`; incoming messages are the
  Server-Sent Events of `GET /api/v1/events` (`event: receive`, `data:` the message as
  JSON, an `id:` each), with a keep-alive comment every 15 s. The daemon keeps the last
  1000 events it wrote: a stream opened again with `Last-Event-ID` begins after it.
- A socket (`daemon --tcp` or `--socket`): one connection, a JSON-RPC request or
  response per line, incoming messages as `receive` notifications; no replay.

Errors are JSON-RPC's: `{"code", "message", "data"}`; signal-cli's own codes are -1 (the
request is wrong), -3 (Signal's servers could not be reached), -4 (an untrusted
identity), -5 (rate limited).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx
import trio

from hermes.actors.errors import HermesError

MAX_LINE = 4 << 20  # bytes of one event or response: anything longer is refused


class RpcError(HermesError):
    """The daemon answered a call with an error."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method}: {code} {message[:300]}")
        self.code, self.message, self.data = code, message, data


class RpcGone(HermesError):
    """The connection to the daemon is not there: `sent`, it went after the request was
    written (the daemon may have acted on it)."""

    def __init__(self, message: str, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


@attrs.frozen
class Incoming:
    """One incoming message as the daemon pushed it: its event id (HTTP only), and the
    `receive` params ({"envelope", "account"}); None: a keep-alive."""

    event_id: str | None
    params: dict[str, Any] | None


def _answer(method: str, body: Any) -> Any:
    if not isinstance(body, dict):
        raise RpcError(method, -32700, "the daemon's answer is not a JSON-RPC object")
    error = body.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        raise RpcError(method, code if isinstance(code, int) else -32603,
                       str(error.get("message") or ""), error.get("data"))  # fmt: skip
    return body.get("result")


class HttpRpc:
    """The daemon over HTTP: calls, and its event stream."""

    def __init__(self, base: str, http: httpx.AsyncClient) -> None:
        self.base = base.rstrip("/")
        self.http = http
        self.ids = itertools.count(1)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        body = {"jsonrpc": "2.0", "method": method, "id": next(self.ids)}
        if params:
            body["params"] = params
        response = await self.http.post(f"{self.base}/api/v1/rpc", json=body)
        if response.status_code != 200:
            raise RpcError(method, -32603, f"HTTP {response.status_code}")
        try:
            return _answer(method, response.json())
        except ValueError as exc:
            raise RpcError(method, -32700, f"not JSON: {exc}") from exc

    async def events(self, account: str, last_event_id: str | None) -> AsyncIterator[Incoming]:
        """The event stream from after `last_event_id`, keep-alives included, until the
        daemon closes it."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        url = f"{self.base}/api/v1/events"
        timeout = httpx.Timeout(10.0, read=None)  # the watchdog owns silence
        async with self.http.stream("GET", url, params={"account": account}, headers=headers,
                                    timeout=timeout) as response:  # fmt: skip
            if response.status_code != 200:
                raise RpcError("events", -32603, f"HTTP {response.status_code}")
            event_id, kind, data = None, "message", []
            async for line in response.aiter_lines():
                if len(line) > MAX_LINE:
                    raise RpcError("events", -32700, "an event past the size cap")
                if line.startswith(":"):
                    yield Incoming(None, None)  # a keep-alive
                elif not line:
                    if data and kind == "receive":
                        yield Incoming(event_id, _params("\n".join(data)))
                    event_id, kind, data = None, "message", []
                else:
                    field, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if field == "id":
                        event_id = value
                    elif field == "event":
                        kind = value
                    elif field == "data":
                        data.append(value)


def _params(text: str) -> dict[str, Any] | None:
    """An event's data, or None when it is not a JSON object (never a crash)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class SocketRpc:
    """The daemon over one TCP or Unix socket connection: calls (answers matched by id)
    and `receive` notifications, read by `run()`."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.stream: trio.abc.Stream | None = None
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.MemoryObjectSendStream[Any]] = {}
        self.sending = trio.Lock()
        self.incoming_send, self.incoming = trio.open_memory_channel[Incoming](1000)

    async def open(self) -> None:
        where = urlsplit(self.address)
        if where.scheme == "unix":
            self.stream = await trio.open_unix_socket(self.address.removeprefix("unix:"))
        else:
            self.stream = await trio.open_tcp_stream(where.hostname or "127.0.0.1",
                                                     where.port or 7583)  # fmt: skip

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None
        for waiter in self.waiting.values():
            await waiter.aclose()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        if self.stream is None:
            raise RpcGone(f"{method}: not connected to the daemon")
        call_id = next(self.ids)
        body = {"jsonrpc": "2.0", "method": method, "id": call_id}
        if params:
            body["params"] = params
        send, receive = trio.open_memory_channel[Any](1)
        self.waiting[call_id] = send
        try:
            try:
                async with self.sending:
                    await self.stream.send_all(json.dumps(body).encode() + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise RpcGone(f"{method}: {exc!r}", sent=True) from exc
            async with receive:
                try:
                    answer = await receive.receive()
                except trio.EndOfChannel:
                    raise RpcGone(
                        f"{method}: the connection to the daemon closed", sent=True
                    ) from None
        finally:
            self.waiting.pop(call_id, None)
        return _answer(method, answer)

    async def run(self) -> None:
        """Read lines until the daemon closes the connection: answers to their callers,
        notifications to `incoming`."""
        assert self.stream is not None
        buffer = b""
        while True:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise RpcGone("the daemon closed the connection")
            buffer += chunk
            if len(buffer) > MAX_LINE and b"\n" not in buffer:
                raise RpcError("receive", -32700, "a line past the size cap")
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                await self._dispatch(line)

    async def _dispatch(self, line: bytes) -> None:
        message = _params(line.decode("utf-8", "replace")) if line.strip() else None
        if message is None:
            return
        if message.get("method") == "receive":
            params = message.get("params")
            await self.incoming_send.send(Incoming(None, params if isinstance(params, dict)
                                                   else None))  # fmt: skip
        elif isinstance(message.get("id"), int) and message["id"] in self.waiting:
            await self.waiting[message["id"]].send(message)


@asynccontextmanager
async def socket_rpc(address: str) -> AsyncIterator[SocketRpc]:
    """A socket connection to the daemon, its reader running; the daemon closing it
    ends the block with RpcGone."""
    rpc = SocketRpc(address)
    await rpc.open()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rpc.run)
            yield rpc
            nursery.cancel_scope.cancel()
    finally:
        await rpc.aclose()


@asynccontextmanager
async def daemon(address: str, timeout: httpx.Timeout) -> AsyncIterator[HttpRpc | SocketRpc]:
    """The daemon at `address` (http://, tcp://, unix:), for calls."""
    if address.startswith(("http://", "https://")):
        async with httpx.AsyncClient(timeout=timeout) as http:
            yield HttpRpc(address, http)
    else:
        async with socket_rpc(address) as rpc:
            yield rpc
