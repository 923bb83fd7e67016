"""BatchActor: an actor that takes every waiting message at once.

For actors whose work is cheaper in bulk (the database writer commits a whole
batch in one transaction): the loop takes the first message, then everything
already waiting up to `batch_max`, and hands them to `handle_batch` together.
"""

from __future__ import annotations

from typing import Any

import outcome
import trio

from hermes.actors.actor import Actor
from hermes.actors.address import Call
from hermes.actors.errors import ActorStopped


class BatchActor(Actor):
    """Implement `handle_batch(msgs)`, returning one outcome per message, in order.

    A call's outcome is its reply (or its error, raised in the caller); an
    error outcome for a cast crashes the actor, as with `Actor.handle`.
    """

    batch_max: int = 256

    async def handle_batch(self, msgs: list[Any]) -> list[outcome.Outcome]:
        raise NotImplementedError

    async def _dispatch_batch(self, items: list[Any]) -> None:
        msgs = [item.msg if type(item) is Call else item for item in items]
        try:
            results = await self.handle_batch(msgs)
        except BaseException:
            for item in items:
                if type(item) is Call:
                    item.reply.fail(ActorStopped(self.name))
            raise
        crash: BaseException | None = None
        for item, result in zip(items, results, strict=True):
            if type(item) is Call:
                item.reply.deliver(result)
            elif isinstance(result, outcome.Error) and crash is None:
                crash = result.error
        if crash is not None:
            raise crash

    def _take_waiting(self, first: Any, recv: trio.MemoryReceiveChannel[Any]) -> list[Any]:
        batch = [first]
        limit = self.batch_max
        while len(batch) < limit:
            try:
                batch.append(recv.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        return batch

    async def _receive_loop(self, recv: trio.MemoryReceiveChannel[Any]) -> None:
        async for first in recv:
            await self._dispatch_batch(self._take_waiting(first, recv))

    async def _handle_pending(self) -> None:
        while self._pending:
            count = min(len(self._pending), self.batch_max)
            await self._dispatch_batch([self._pending.popleft() for _ in range(count)])
