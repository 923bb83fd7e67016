"""Events on their way to being routed, in arrival order: admission told the router of
them (most already claimed for it), or the router took them from the journal at start
(claimed here, the claims of a batch queued together: one commit for the lot)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import InboundEvent
from hermes.gateway.admission import Admitted
from hermes.gateway.journal import claim
from hermes.state.db import Db

BATCH = 64  # events claimed together


class Arrivals:
    def __init__(self, owner: str, clock: Clock) -> None:
        self.owner = owner  # the router's incarnation in the journal
        self.clock = clock
        self._in, self._out = trio.open_memory_channel[Admitted](256)
        self._idle = trio.Event()

    async def send(self, told: Admitted) -> None:
        await self._in.send(told)

    async def settled(self) -> None:
        """Every event that arrived so far is routed."""
        while not self._idle.is_set() or self._out.statistics().current_buffer_used:
            await self._idle.wait()
            await trio.lowlevel.checkpoint()

    async def run(
        self, db: Db, route: Callable[[InboundEvent, float | None], Awaitable[object]]
    ) -> None:
        """Route each event once it is claimed for this router; one taken already (a
        duplicate, another router's) is not."""
        while True:
            self._idle.set()
            batch = [await self._out.receive()]
            self._idle = trio.Event()
            while len(batch) < BATCH:
                try:
                    batch.append(self._out.receive_nowait())
                except trio.WouldBlock:
                    break
            now = self.clock.now()
            claims = [
                None
                if told.owner == self.owner
                else await db.submit(
                    claim, told.event.platform, told.event.event_id, self.owner, now
                )
                for told in batch
            ]
            for told, pending in zip(batch, claims, strict=True):
                if pending is None or await pending.result():
                    await route(told.event, told.arrived)
