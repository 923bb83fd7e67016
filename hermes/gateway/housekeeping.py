"""What the router does now and then rather than for one event: take what the journal
holds that nobody was told of, welcome users an operator approved, forget idle rate
limits, and read pairing's owners again (`OwnersCache`: a turn asks its sender's role,
and owners rarely change)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import Target
from hermes.delivery.replies import Replies
from hermes.gateway.admission import Admitted
from hermes.gateway.journal import admitted
from hermes.gateway.rate_limit import InboundLimit
from hermes.state.db import Db
from hermes.state.pairing import to_welcome, welcomed

HOUSEKEEPING = 5.0  # seconds between looks for approvals to announce


class OwnersCache:
    """Each platform's owners by pairing, as read since the cache was last forgotten (each
    housekeeping round, and PairingChanged)."""

    def __init__(self, read: Callable[[str], Awaitable[frozenset[str]]]) -> None:
        self._read = read
        self._owners: dict[str, frozenset[str]] = {}

    async def of(self, platform: str) -> frozenset[str]:
        if platform not in self._owners:
            self._owners[platform] = await self._read(platform)
        return self._owners[platform]

    def forget(self) -> None:
        self._owners.clear()


@attrs.define
class Housekeeping:
    """The router's rounds, every HOUSEKEEPING seconds or at once when told (`look_now`).
    `owner_ids`: who owns a platform now (a welcome says whether the user is one);
    `arrive`: hands an event taken from the journal to the router's arrivals."""

    db: Db
    clock: Clock
    replies: Replies
    owners: OwnersCache
    platforms: frozenset[str]
    owner_ids: Callable[[str], Awaitable[frozenset[str]]]
    limit: InboundLimit
    arrive: Callable[[Admitted], Awaitable[None]]
    _look: trio.Event = attrs.Factory(trio.Event)

    def look_now(self) -> None:
        """An operator approved someone through serve: tell them they are in, now."""
        self.owners.forget()
        self._look.set()

    async def run(self) -> None:
        """Tell users an operator approved that they are in: at once when the approval
        came through serve (`look_now`), else at the next round (an approval made in
        state.db with no serve running, or by another serve on the home)."""
        while True:
            self._look = trio.Event()
            self.owners.forget()  # an approval or revocation made outside serve shows now
            # An event admitted while this router was starting (or restarting) had no
            # one to tell: take it from the journal (a claim is atomic: never twice).
            for event in await self.db.read(admitted, self.clock.now() - HOUSEKEEPING):
                await self.arrive(Admitted(event))
            for welcome in await self.db.read(to_welcome):
                if welcome.platform not in self.platforms:
                    continue
                owner = welcome.user_id in await self.owner_ids(welcome.platform)  # as it is now
                welcome = attrs.evolve(welcome, owner=owner)
                target = Target(welcome.platform, welcome.chat_id)
                await self.replies.answer(None, target, welcome.message(), welcome.key)
                await self.db.write(welcomed, welcome.platform, welcome.user_id, self.clock.now())
            self.limit.forget_idle()
            with trio.move_on_after(HOUSEKEEPING):
                await self._look.wait()
