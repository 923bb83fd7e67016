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
from hermes.adapters.http import read_capped

MAX_LINE = 4 << 20  # bytes of one event or call answer: anything longer is refused
INCOMING = 1000  # messages read off a socket and not yet taken


UNANSWERED = -32700  # hermes's own: the daemon's answer could not be read (it may have acted)
TOO_LARGE = -32000  # hermes's own: an answer past its cap


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
        raise RpcError(
            method,
            code if isinstance(code, int) else -32603,
            str(error.get("message") or ""),
            error.get("data"),
        )
    return body.get("result")


class HttpRpc:
    """The daemon over HTTP: calls, and its event stream."""

    def __init__(self, base: str, http: httpx.AsyncClient) -> None:
        self.base = base.rstrip("/")
        self.http = http
        self.ids = itertools.count(1)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, limit: int = MAX_LINE
    ) -> Any:
        """The call's result; its answer read up to `limit` bytes (an attachment's more)."""
        body = {"jsonrpc": "2.0", "method": method, "id": next(self.ids)}
        if params:
            body["params"] = params
        async with self.http.stream("POST", f"{self.base}/api/v1/rpc", json=body) as response:
            if response.status_code != 200:
                raise RpcError(method, UNANSWERED, f"HTTP {response.status_code}")
            raw = await read_capped(response, limit)
        if raw is None:
            raise RpcError(method, TOO_LARGE, f"an answer past {limit} bytes")
        try:
            return _answer(method, json.loads(raw))
        except ValueError as exc:
            raise RpcError(method, UNANSWERED, f"not JSON: {exc}") from exc

    async def events(self, account: str, last_event_id: str | None) -> AsyncIterator[Incoming]:
        """The event stream from after `last_event_id`, keep-alives included, until the
        daemon closes it."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        url = f"{self.base}/api/v1/events"
        timeout = httpx.Timeout(10.0, read=None)  # the watchdog owns silence
        async with self.http.stream(
            "GET", url, params={"account": account}, headers=headers, timeout=timeout
        ) as response:
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

    def __init__(self, address: str, max_line: int = MAX_LINE) -> None:
        self.address = address
        self.max_line = max_line
        self.stream: trio.abc.Stream | None = None
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.MemoryObjectSendStream[Any]] = {}
        self.sending = trio.Lock()
        # Messages wait here while an admission runs (answers to calls must not wait
        # behind them); when the connection ends, what is here is still taken first.
        self.incoming_send, self.incoming = trio.open_memory_channel[Incoming](INCOMING)

    async def open(self) -> None:
        where = urlsplit(self.address)
        if where.scheme == "unix":
            self.stream = await trio.open_unix_socket(self.address.removeprefix("unix:"))
        else:
            self.stream = await trio.open_tcp_stream(
                where.hostname or "127.0.0.1", where.port or 7583
            )

    async def aclose(self) -> None:
        stream, self.stream = self.stream, None
        for waiter in list(self.waiting.values()):
            waiter.close()
        self.incoming_send.close()
        if stream is not None:
            with trio.CancelScope(shield=True):  # closed even when the close is a cancel's
                await stream.aclose()

    async def call(
        self, method: str, params: dict[str, Any] | None = None, limit: int = MAX_LINE
    ) -> Any:
        """The call's result (`limit`: the connection's own line cap applies)."""
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
                raise RpcGone(f"{method}: {exc!r}") from exc  # a line cut short: not run
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
        notifications to `incoming`, which then ends (what was read is taken first)."""
        assert self.stream is not None
        buffer = b""
        try:
            while chunk := await self.stream.receive_some(65536):
                buffer += chunk
                if len(buffer) > self.max_line and b"\n" not in buffer:
                    raise RpcError("receive", TOO_LARGE, "a line past the size cap")
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    await self._dispatch(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the connection went: the same as its end
        for waiter in list(self.waiting.values()):
            waiter.close()
        self.incoming_send.close()

    async def _dispatch(self, line: bytes) -> None:
        message = _params(line.decode("utf-8", "replace")) if line.strip() else None
        if message is None:
            return
        if message.get("method") == "receive":
            params = message.get("params")
            await self.incoming_send.send(
                Incoming(None, params if isinstance(params, dict) else None)
            )
        elif isinstance(message.get("id"), int) and message["id"] in self.waiting:
            await self.waiting[message["id"]].send(message)


@asynccontextmanager
async def socket_rpc(address: str, max_line: int = MAX_LINE) -> AsyncIterator[SocketRpc]:
    """A socket connection to the daemon, its reader running; when the daemon closes it,
    `incoming` ends and calls raise RpcGone."""
    rpc = SocketRpc(address, max_line)
    await rpc.open()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rpc.run)
            yield rpc
            nursery.cancel_scope.cancel()
    finally:
        await rpc.aclose()


@asynccontextmanager
async def daemon(
    address: str, timeout: httpx.Timeout, max_line: int = MAX_LINE
) -> AsyncIterator[HttpRpc | SocketRpc]:
    """The daemon at `address` (http://, tcp://, unix:), for calls."""
    if address.startswith(("http://", "https://")):
        async with httpx.AsyncClient(timeout=timeout) as http:
            yield HttpRpc(address, http)
    else:
        async with socket_rpc(address, max_line) as rpc:
            yield rpc
