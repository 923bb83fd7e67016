"""A generation: one opened instance of a database file, shared by everyone who acquired it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.reply import Reply
from hermes.state.errors import StateDbReplacedError, WriterStopped
from hermes.state.messages import NewMessage
from hermes.state.readpool import PoolClosed, ReadPool
from hermes.state.writer_core import AddTokens, Append, CheckIdentity, Write

T = TypeVar("T")


class Generation:
    """Writes go to the generation's DbWriter; reads to its ReadPool.

    Once retired (its file was replaced) it is never lent again; everything
    done through it raises StateDbReplacedError. Holders let go with
    `Registry.release`, never by closing it.
    """

    def __init__(self, path: Path, number: int, writer: Address, reads: ReadPool) -> None:
        self.path = path
        self.number = number
        self.writer = writer
        self.reads = reads
        self.refs = 0
        self.retired: str | None = None
        self.crashed = False

    def __repr__(self) -> str:
        state = f"retired: {self.retired}" if self.retired else f"refs={self.refs}"
        return f"<Generation {self.path} #{self.number} {state}>"

    @property
    def usable(self) -> bool:
        return self.retired is None and not self.crashed

    def _replaced(self) -> StateDbReplacedError:
        return StateDbReplacedError(str(self.path), self.retired or "retired")

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` in the writer's next batch; returns after the commit.

        No timeout of its own: the writer answers every request (a batch is
        bounded by its busy retries) or fails it when it stops. A caller that
        needs a bound wraps the call in trio.fail_after.
        """
        return await self.result_of(await self.submit_request(Write(fn, args)))

    async def submit(self, fn: Callable[..., Any], *args: Any) -> Reply:
        """Queue `fn(conn, *args)` for the writer's next batch and return at once;
        `await gen.result_of(slot)` (in this task) returns after the commit."""
        return await self.submit_request(Write(fn, args))

    async def append(
        self, message: NewMessage, input_tokens: int = 0, output_tokens: int = 0
    ) -> Reply:
        """Queue a message (and the tokens it cost); the slot's answer is its row id."""
        return await self.submit_request(Append(message, input_tokens, output_tokens))

    async def add_tokens(self, session_id: str, input_tokens: int, output_tokens: int) -> None:
        """Token deltas are merged per session inside the writer's batch."""
        reply = await self.submit_request(AddTokens(session_id, input_tokens, output_tokens))
        await self.result_of(reply)

    async def submit_request(self, request: Write | Append | AddTokens) -> Reply:
        if self.retired is not None:
            raise self._replaced()
        if not self.crashed:
            try:
                return await self.writer.submit(request)
            except ActorStopped:
                self.crashed = True
        raise WriterStopped(f"the writer of {self.path} has stopped; nothing was written")

    async def result_of(self, slot: Reply) -> Any:
        """The answer to a submitted request, once committed."""
        try:
            return await slot.wait()
        except ActorStopped:  # it stopped with the request in flight: it may have committed
            self.crashed = True
            raise
        finally:
            slot.abandon()

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` on a read-only connection; never waits for the writer."""
        if self.retired is not None:
            raise self._replaced()
        try:
            return await self.reads.run(fn, *args)
        except PoolClosed:
            raise self._replaced() from None

    async def same_file(self) -> bool:
        """Ask the writer whether the path still names this file (it retires if not)."""
        if not self.usable:
            return False
        try:
            return await self.writer.call(CheckIdentity())
        except ActorStopped:
            self.crashed = True
            return False

    def mark_retired(self, why: str) -> None:
        self.retired = why
