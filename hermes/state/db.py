"""The handle on a database: the one way to write, pipeline a write, and read.

    async with Db(registry, path) as db:
        row_id = await db.write(append_message, NewMessage(...))
        pending = await db.submit(lambda conn: ...)   # queued now, in order
        ...
        value = await pending.result()                # after its commit
        rows = await db.read(list_sessions, 20)

A write is any callable of a connection, run in the writer's next batch and
answered after the commit; a read runs on a read-only connection and never
waits for the writer. The gateway and the scheduler hold state.db for
months: when someone restores a backup under them, the generation retires,
and the handle moves to the new file and retries that one operation once.
Only NotWritten errors are retried (a replaced file, a writer that had
stopped): they are raised before anything was written, so a retry cannot
write twice. If the retry fails too, the error reaches the caller.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import attrs
import trio

from hermes.actors.errors import ActorStopped
from hermes.actors.reply import Reply
from hermes.state.errors import NotWritten, StateDbReplacedError, WriterStopped
from hermes.state.readpool import PoolClosed
from hermes.state.registry import Generation, Registry
from hermes.state.writer_core import Write

T = TypeVar("T")


class Db:
    """One holder of one database path; open it with `async with` (or an exit stack)."""

    def __init__(self, registry: Registry, path: os.PathLike[str] | str) -> None:
        self.registry = registry
        self.path = path
        self._gen: Generation | None = None
        self._swapping = trio.Lock()  # many tasks share a handle (a gateway's sessions)

    async def __aenter__(self) -> Db:
        self._gen = await self.registry.acquire(self.path)
        return self

    async def __aexit__(self, *exc: object) -> None:
        gen, self._gen = self._gen, None
        if gen is not None:
            await self.registry.release(gen)

    async def write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run `fn(conn, *args, **kwargs)` in the writer's next batch; returns after the
        commit. No timeout of its own: the writer answers every request or fails it
        when it stops; a caller that needs a bound wraps the call in trio.fail_after."""
        return await (await self.submit(fn, *args, **kwargs)).result()

    async def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> PendingWrite:
        """Queue a write and return at once; `await pending.result()` (in the same task)
        returns after its commit. Writes queued one after another commit in order."""
        request = Write(fn, args, kwargs)
        gen = await self._live()
        return PendingWrite(self, request, gen, await _queue(gen, request))

    async def read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run `fn(conn, *args, **kwargs)` on a read-only connection."""
        return await self._retry_once(lambda gen: _read(gen, fn, args, kwargs))

    async def _live(self) -> Generation:
        """The generation to use now: the held one, or its replacement once it retired.
        One task swaps while the others wait; the old one is let go only once the new
        one is held, so a failed open leaves the handle as it was, to try again."""
        if self._gen is None:
            raise RuntimeError("a Db handle used outside its async with block")
        if self._gen.usable:
            return self._gen
        async with self._swapping:
            old = self._gen
            if not old.usable:
                new = await self.registry.acquire(self.path)
                self._gen = new
                with trio.CancelScope(shield=True):
                    await self.registry.release(old)
        return self._gen

    async def _retry_once(
        self, op: Callable[[Generation], Awaitable[T]], first: Awaitable[T] | None = None
    ) -> T:
        """`op` on the live generation (or `first`, an attempt already under way); if
        nothing of it was written (NotWritten), once more on the generation now live."""
        try:
            return await (first if first is not None else op(await self._live()))
        except NotWritten:
            return await op(await self._live())


@attrs.define
class PendingWrite:
    """A write in the writer's queue; its result is retried once like Db.write's."""

    db: Db
    request: Write
    gen: Generation
    reply: Reply

    async def result(self) -> Any:
        async def again(gen: Generation) -> Any:
            return await _answer(gen, await _queue(gen, self.request))

        return await self.db._retry_once(again, first=_answer(self.gen, self.reply))

    def abandon(self) -> None:
        """Stop caring about the answer; the write still happens."""
        self.reply.abandon()


async def _queue(gen: Generation, request: Write) -> Reply:
    """Put the request in the generation's writer's mailbox. On a generation that can
    take no writes, the reply carries the NotWritten error for the retry to see."""
    if gen.retired is None and not gen.crashed:
        try:
            return await gen.writer.submit(request)
        except ActorStopped:
            gen.crashed = True
    reply = Reply()
    reply.fail(_not_written(gen))
    return reply


async def _answer(gen: Generation, reply: Reply) -> Any:
    """The answer to a queued request, once committed."""
    try:
        return await reply.wait()
    except ActorStopped:  # it stopped with the request in flight: it may have committed
        gen.crashed = True
        raise
    finally:
        reply.abandon()


async def _read(gen: Generation, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
    if gen.retired is not None:
        raise _not_written(gen)
    try:
        return await gen.reads.run(fn, *args, **kwargs)
    except PoolClosed:
        raise _not_written(gen) from None


def _not_written(gen: Generation) -> NotWritten:
    if gen.retired is not None:
        return StateDbReplacedError(str(gen.path), gen.retired)
    return WriterStopped(f"the writer of {gen.path} has stopped; nothing was written")


class UsesDb:
    """Base for a helper an actor holds open (`async with`, on its exit stack): a
    state.db handle for as long as the actor lives."""

    def __init__(self, registry: Registry, state_db: Path) -> None:
        self.db = Db(registry, state_db)
        self._exits = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Self:
        await self._exits.enter_async_context(self.db)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exits.aclose()
