"""One Discord gateway socket, as its reader, its heartbeat and its introduction share it.

Hermes closes a socket only with a code Discord keeps the session for (4000): a close
with 1000 or 1001 ends the session, a Resume after it is refused, and what was
dispatched in between is lost. Hermes records why it closed one, because
trio-websocket reports our own close to the reader as 1000 whatever code went out.
A send on a socket that closed meanwhile is no error: the reader sees the close and
says how the socket ended.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

RESUMABLE_CLOSE = 4000  # anything but 1000/1001: the session stays resumable
CLOSE_WAIT = 5.0  # for Discord's answer to our close frame


@attrs.define(eq=False)
class Link:
    """A socket and what its tasks know of it."""

    ws: WebSocketConnection
    interval: float = 0.0  # seconds between heartbeats, from Hello
    acked: bool = True  # the last heartbeat was acknowledged
    reading: bool = False  # the reader waits on the socket (so no ACK sits unread)
    ready: bool = False  # READY or RESUMED came: a session is live on this socket
    closed_by_us: str | None = None  # why hermes closed it

    async def receive(self) -> dict[str, Any]:
        """The next frame (ConnectionClosed once the socket is done); one that is not a
        JSON object reads as an empty one, which nothing acts on."""
        self.reading = True
        try:
            text = await self.ws.get_message()
        finally:
            self.reading = False
        try:
            frame = json.loads(text)
        except ValueError:
            return {}
        return frame if isinstance(frame, dict) else {}

    async def send(self, op: int, d: Any) -> None:
        try:
            await self.ws.send_message(json.dumps({"op": op, "d": d}))
        except ConnectionClosed:
            pass  # the reader says how it ended

    async def close(self, why: str) -> None:
        """Close with the resumable code (waiting a while for Discord's answer), noting
        why; under cancellation the TCP connection just ends, which keeps the session
        resumable too."""
        if self.closed_by_us is None and self.ws.closed is None:  # not closed by Discord
            self.closed_by_us = why
        with trio.move_on_after(CLOSE_WAIT):
            await self.ws.aclose(code=RESUMABLE_CLOSE)
