"""Admission: what every adapter calls with an inbound event before it acknowledges it.

The event is committed to the inbound journal first; only then is the router
told (a cast that carries the event, so it need not read it back). While a
router runs, that one commit writes the event already claimed by it: the
turn's first commit is its last before the model is called. When no router
runs (it is restarting, or stopped in a drain) the event waits in the
journal, and the router takes it when it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import trio
from prometheus_client import Counter

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import Cursor, InboundEvent, Recorded
from hermes.gateway.journal import admit, recorded, release
from hermes.state.db import UsesDb
from hermes.state.registry import Registry

INBOUND = Counter(
    "hermes_messages_in", "Inbound events: admitted or duplicate", ["platform", "outcome"]
)


@attrs.frozen
class Admitted:
    """To the router: this event is in the journal and waits for its turn, claimed for
    it by admission when `owner` is its name (else the router claims it). `arrived`:
    when the adapter handed it in (Trio's clock), for the turn overhead histogram;
    None for one taken from the journal."""

    event: InboundEvent
    owner: str | None = None
    arrived: float | None = None


@attrs.frozen
class Intake:
    """What a running router hands out: its mailbox, and its name in the journal."""

    address: Address
    owner: str


class Admission(UsesDb):
    """An adapter's `admit`: held open by the adapter (`async with`: a state.db handle)."""

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        router: Callable[[], Intake | None],
        clock: Clock,
    ) -> None:
        super().__init__(registry, state_db)
        self.router = router
        self.clock = clock

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        arrived = trio.current_time()
        intake = self.router()
        owner = intake.owner if intake is not None else None
        if not await self.db.write(admit, event, self.clock.now(), owner, cursor):
            INBOUND.labels(event.platform, "duplicate").inc()
            return False  # a duplicate: it was answered, or will be
        INBOUND.labels(event.platform, "admitted").inc()
        if intake is None:
            return True  # it takes the event from the journal when it starts
        told = Admitted(event, intake.owner, arrived)
        try:
            try:
                intake.address.cast_nowait(told)
            except trio.WouldBlock:  # backpressure: the router is behind
                await intake.address.cast(told)
        except ActorStopped:  # it ended before it heard: the next router takes the event
            await self.db.write(release, event.platform, event.event_id, intake.owner)
        return True

    async def recorded(self, platform: str, event_id: str) -> Recorded | None:
        """How an admitted event of `platform` ended (hermes.gateway.journal.recorded)."""
        return await self.db.read(recorded, platform, event_id)
