"""The Chrome DevTools Protocol over `--remote-debugging-pipe`: a small typed client of
ours on Trio (no asyncio driver, no port any local process could connect to).

Chromium reads commands from its fd 3 and writes answers and events to its fd 4, each a
JSON object ended by a NUL byte. `send(method, params, session)` answers the command's
`result` or raises `CdpError` with Chromium's message; events are kept by method name for
`wait_for` (bounded: the oldest are dropped), and a pipe that closes ends every waiting
call with `CdpClosed`.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Callable
from typing import Any

import attrs
import trio

from hermes.actors.errors import HermesError, Unavailable

MESSAGE_LIMIT = 64 * 2**20  # a screenshot of a long page is large; more is an error
EVENTS_KEPT = 256  # per method
READ_SIZE = 65_536
SEND_SECONDS = 30.0


class CdpError(HermesError):
    """Chromium answered a command with an error (its message)."""


class CdpClosed(Unavailable):
    """The pipe to Chromium closed: the browser is gone."""


@attrs.frozen
class Event:
    method: str
    params: dict[str, Any]
    session: str | None


def split_messages(buffer: bytearray) -> list[bytes]:
    """The whole NUL-ended messages at the start of `buffer`, taken out of it."""
    found = []
    while (end := buffer.find(b"\0")) >= 0:
        found.append(bytes(buffer[:end]))
        del buffer[: end + 1]
    if len(buffer) > MESSAGE_LIMIT:
        raise CdpClosed(f"Chromium sent a message over {MESSAGE_LIMIT // 2**20} MB")
    return found


class Cdp:
    """One connection to one browser. Run `reader` in a nursery for as long as it is used."""

    def __init__(self, send_stream: trio.abc.SendStream, receive_stream: trio.abc.ReceiveStream):
        self._out = send_stream
        self._in = receive_stream
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._events: dict[str, collections.deque[Event]] = {}
        self._arrived = trio.Event()  # set (and replaced) whenever an event arrives
        self._sending = trio.Lock()
        self.closed: str | None = None  # why the pipe is closed; None while it is open
        self.listeners: list[Callable[[Event], None]] = []

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = SEND_SECONDS,
    ) -> dict[str, Any]:
        """The result of `method`; CdpError with Chromium's words when it refuses."""
        if self.closed is not None:
            raise CdpClosed(self.closed)
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        sender, receiver = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[ident] = sender
        try:
            if self.closed is not None:  # it closed while this call was being made
                raise CdpClosed(self.closed)
            async with self._sending:
                await self._out.send_all(json.dumps(message).encode() + b"\0")
            with trio.fail_after(timeout):
                async with receiver:
                    try:
                        answer = await receiver.receive()
                    except trio.EndOfChannel:
                        raise CdpClosed(self.closed or "the browser closed") from None
        except trio.TooSlowError:
            raise CdpError(f"{method}: no answer from the browser in {timeout:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise CdpClosed(self.closed or "the browser closed") from None
        finally:
            self._waiting.pop(ident, None)
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error'].get('message', answer['error'])}")
        return answer.get("result", {})

    def taken(self, method: str) -> list[Event]:
        """The events of `method` that arrived since the last `taken` of it."""
        kept = self._events.pop(method, None)
        return list(kept or ())

    async def wait_for(self, method: str, timeout: float) -> Event | None:
        """The next event of `method` (one kept already, else the first to come); None
        after `timeout`."""
        with trio.move_on_after(timeout):
            while True:
                kept = self._events.get(method)
                if kept:
                    return kept.popleft()
                if self.closed is not None:
                    raise CdpClosed(self.closed)
                await self._arrived.wait()
        return None

    async def until_closed(self) -> None:
        """Return once the pipe to the browser has closed."""
        while self.closed is None:
            await self._arrived.wait()

    async def reader(self) -> None:
        """Read until the pipe ends: answers to their callers, events kept."""
        buffer = bytearray()
        try:
            while piece := await self._in.receive_some(READ_SIZE):
                buffer += piece
                for raw in split_messages(buffer):
                    self._dispatch(json.loads(raw))
            self.closed = "the browser closed its end"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.closed = f"the pipe to the browser broke: {exc}"
        except CdpClosed as exc:
            self.closed = str(exc)
        finally:
            self.closed = self.closed or "the browser's connection ended"
            for sender in self._waiting.values():
                sender.close()
            self._arrived.set()

    def _dispatch(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if ident is not None:
            sender = self._waiting.get(ident)
            if sender is not None:
                try:
                    sender.send_nowait(message)
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # its caller gave up
            return
        method = message.get("method")
        if not isinstance(method, str):
            return
        event = Event(method, message.get("params") or {}, message.get("sessionId"))
        self._events.setdefault(method, collections.deque(maxlen=EVENTS_KEPT)).append(event)
        for listener in self.listeners:
            listener(event)
        self._arrived.set()
        self._arrived = trio.Event()
