"""Addresses: how anyone talks to an actor (cast and call)."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from hermes.actors.errors import ActorStopped, CallTimeout
from hermes.actors.reply import Reply


@attrs.define(slots=True)
class Call:
    """The envelope of a call: the message and the slot its reply goes into."""

    msg: Any
    reply: Reply


class Address:
    """A handle on an actor's mailbox; holds its own clone of the send channel."""

    __slots__ = ("name", "_send")

    def __init__(self, name: str, send: trio.MemorySendChannel[Any]) -> None:
        self.name = name
        self._send = send

    def __repr__(self) -> str:
        return f"<Address {self.name}>"

    def close(self) -> None:
        self._send.close()

    @property
    def mailbox_depth(self) -> int:
        return self._send.statistics().current_buffer_used

    async def cast(self, msg: Any) -> None:
        """Deliver msg and return; waits only while the mailbox is full.

        A Trio checkpoint, as every async function of the kernel is: a caller
        in a cancelled scope gets Cancelled even when the mailbox has room.
        """
        try:
            await self._send.send(msg)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise ActorStopped(self.name) from None

    def cast_nowait(self, msg: Any) -> None:
        """Deliver msg without blocking or yielding: trio.WouldBlock if the mailbox
        is full, ActorStopped if the actor is stopped."""
        try:
            self._send.send_nowait(msg)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise ActorStopped(self.name) from None

    async def call(self, msg: Any, timeout: float | None = 30.0) -> Any:
        """Deliver msg and return the actor's reply, or raise what its handler raised.

        The timeout covers waiting for room in the mailbox and for the reply.
        `timeout=None` waits as long as the actor lives (it answers every call,
        or fails it with ActorStopped when it stops) and skips the cost of a
        cancel scope on hot paths.
        """
        if timeout is None:
            return await self._call(msg)
        with trio.move_on_after(timeout):
            return await self._call(msg)
        raise CallTimeout(self.name, timeout)

    async def submit(self, msg: Any) -> Reply:
        """Deliver msg as a call and return its reply slot without waiting for it.

        The calling task awaits `slot.wait()` later, or `slot.abandon()`s it. A
        caller uses this to put requests in the mailbox in order now and wait for
        their answers together (the writer then commits them in one batch).
        """
        reply = Reply()
        try:
            await self._send.send(Call(msg, reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            reply.abandon()
            raise ActorStopped(self.name) from None
        except BaseException:
            reply.abandon()
            raise
        return reply

    async def _call(self, msg: Any) -> Any:
        reply = await self.submit(msg)
        try:
            return await reply.wait()
        finally:
            reply.abandon()
