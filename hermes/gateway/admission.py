"""Admission: what every adapter calls with an inbound event before it acknowledges it.

The event is committed to the inbound journal first; only then is the router
told (a cast that carries the event, so it need not read it back). While a
router runs, that one commit writes the event already claimed by it: the
turn's first commit is its last before the model is called. When no router
runs (it is restarting, or stopped in a drain) the event waits in the
journal, and the router takes it when it starts.

An event whose answer goes to a platform's home channel (`answer_to: home:telegram`,
an inbound webhook's route) is journaled with that channel's chat as it is now: a
turn resumed after a restart answers where its delivery was meant to go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import attrs
import trio
from prometheus_client import Counter

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import HOME, NOWHERE, Cursor, InboundEvent, Recorded
from hermes.delivery.channels import Platforms, home_channels
from hermes.gateway.journal import admit, recorded, release
from hermes.state.db import UsesDb
from hermes.state.registry import Registry

log = logging.getLogger(__name__)
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
        platforms: Platforms | None = None,
    ) -> None:
        """`platforms`: the sections whose `home_channel`s count (config's)."""
        super().__init__(registry, state_db)
        self.router = router
        self.clock = clock
        self.platforms: Platforms = platforms or {}

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        arrived = trio.current_time()
        if event.answer_to is not None and event.answer_to.startswith(HOME):
            event = await self._home_resolved(event)
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

    async def _home_resolved(self, event: InboundEvent) -> InboundEvent:
        """`event` answering to the home channel its `answer_to` names, as that is now (a
        /sethome's, else config's); nowhere, said in the log, where there is none."""
        platform = event.answer_to[len(HOME) :] if event.answer_to else ""
        home = (await self.db.read(home_channels, self.platforms)).get(platform)
        if home is None:
            log.warning(
                "%s:%s: %s has no home channel (platforms.%s.home_channel, or /sethome"
                " there): its answer stays in its session",
                event.platform,
                event.event_id,
                platform,
                platform,
            )
            return attrs.evolve(event, answer_to=NOWHERE)
        return attrs.evolve(event, answer_to=str(home.target))
