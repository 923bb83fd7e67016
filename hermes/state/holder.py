"""A long-lived holder of one database path that carries on when the file is replaced.

The gateway and the scheduler hold state.db for months. When someone restores
a backup under them, their generation retires; this helper releases it,
acquires the new one and retries that one operation once. If the retry fails
too, the error reaches the caller. Only NotWritten errors are retried (a
replaced file, a writer that had stopped): they are raised before anything is
written, so a retry cannot write twice.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from hermes.actors.reply import Reply
from hermes.state.errors import NotWritten
from hermes.state.generation import Generation
from hermes.state.messages import NewMessage
from hermes.state.registry import Registry
from hermes.state.writer_core import Append, Write

T = TypeVar("T")


class DbHolder:
    """Use as `async with DbHolder(registry, path) as db:` and call db.write / db.read."""

    def __init__(self, registry: Registry, path: os.PathLike[str] | str) -> None:
        self.registry = registry
        self.path = path
        self.gen: Generation | None = None

    async def __aenter__(self) -> DbHolder:
        self.gen = await self.registry.acquire(self.path)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        gen, self.gen = self.gen, None
        if gen is not None:
            await self.registry.release(gen)

    async def _current(self) -> Generation:
        if self.gen is None:
            raise RuntimeError("DbHolder used outside its async with block")
        if not self.gen.usable:
            await self._swap()
        return self.gen

    async def _swap(self) -> None:
        old, self.gen = self.gen, None
        if old is not None:
            await self.registry.release(old)
        self.gen = await self.registry.acquire(self.path)

    async def _retry_once(self, op: Callable[[Generation], Awaitable[T]]) -> T:
        gen = await self._current()
        try:
            return await op(gen)
        except NotWritten:
            return await op(await self._current())  # the retired one is swapped for the new

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._retry_once(lambda gen: gen.write(fn, *args))

    async def submit(self, fn: Callable[..., Any], *args: Any) -> PendingWrite:
        """Queue a write now and wait for its commit later, with `await pending.result()`
        in the same task; writes queued one after another commit in that order."""
        return await self._submit(Write(fn, args))

    async def append(
        self, message: NewMessage, input_tokens: int = 0, output_tokens: int = 0
    ) -> PendingWrite:
        """Queue a message like `submit(append_message, message)`, adding the tokens it
        cost to its session; appends queued together go in as one statement."""
        return await self._submit(Append(message, input_tokens, output_tokens))

    async def _submit(self, request: Write | Append) -> PendingWrite:
        async def queue(gen: Generation) -> PendingWrite:
            return PendingWrite(self, gen, await gen.submit_request(request), request)

        return await self._retry_once(queue)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._retry_once(lambda gen: gen.read(fn, *args))

    async def add_tokens(self, session_id: str, input_tokens: int, output_tokens: int) -> None:
        await self._retry_once(lambda gen: gen.add_tokens(session_id, input_tokens, output_tokens))


@attrs.define
class PendingWrite:
    """A write in the writer's queue; like DbHolder.write, retried once if the file
    was replaced before it committed."""

    holder: DbHolder
    gen: Generation
    reply: Reply
    request: Write | Append

    async def result(self) -> Any:
        try:
            return await self.gen.result_of(self.reply)
        except NotWritten:
            self.gen = await self.holder._current()  # the retired one is swapped for the new
            self.reply = await self.gen.submit_request(self.request)
            return await self.gen.result_of(self.reply)

    def abandon(self) -> None:
        """Stop caring about the answer; the write still happens."""
        self.reply.abandon()
