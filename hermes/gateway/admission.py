"""Admission: what every adapter calls with an inbound event before it acknowledges it.

The event is committed to the inbound journal first; only then is the router
told (a cast that carries the event, so it need not read it back). When the
router is not running (it is restarting, or stopped in a drain) the event
waits in the journal, and the router takes it when it starts.
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
from hermes.adapters.contract import InboundEvent
from hermes.gateway.journal import admit
from hermes.state.db import UsesDb
from hermes.state.registry import Registry

INBOUND = Counter(
    "hermes_messages_in", "Inbound events: admitted or duplicate", ["platform", "outcome"]
)


@attrs.frozen
class Admitted:
    """To the router: this event is in the journal and waits for its turn."""

    event: InboundEvent


class Admission(UsesDb):
    """An adapter's `admit`: held open by the adapter (`async with`: a state.db handle)."""

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        router: Callable[[], Address | None],
        clock: Clock,
    ) -> None:
        super().__init__(registry, state_db)
        self.router = router
        self.clock = clock

    async def __call__(self, event: InboundEvent) -> bool:
        if not await self.db.write(admit, event, self.clock.now()):
            INBOUND.labels(event.platform, "duplicate").inc()
            return False  # a duplicate: it was answered, or will be
        INBOUND.labels(event.platform, "admitted").inc()
        router = self.router()
        if router is None:
            return True  # it takes the event from the journal when it starts
        try:
            try:
                router.cast_nowait(Admitted(event))
            except trio.WouldBlock:
                await router.cast(Admitted(event))  # backpressure: the router is behind
        except ActorStopped:
            pass  # as above
        return True
