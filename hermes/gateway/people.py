"""Who a sender is across platforms: the person their account is linked as (`/link`),
while every account of that person still has one role. A link is made only between
accounts of the same role; if config later makes one an owner and not the other, the
link is not followed (each account is itself again) until they are the same again, so a
user's account never reaches an owner's memory or conversations."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from hermes.adapters.contract import InboundEvent
from hermes.config import Role
from hermes.state.db import Db
from hermes.state.identities import accounts_of, person_of

log = logging.getLogger(__name__)


class People:
    def __init__(
        self,
        db: Db,
        role: Callable[[InboundEvent], Awaitable[Role]],
        owner_ids: Callable[[str], Awaitable[frozenset[str]]],
    ) -> None:
        self.db = db
        self.role = role
        self.owner_ids = owner_ids

    async def person(self, event: InboundEvent) -> str | None:
        """The person `event`'s sender is, where linked and their roles still agree."""
        person = await self.db.read(person_of, event.platform, event.user_id)
        if person is None:
            return None
        owner = await self.role(event) == "owner"
        for platform, user_id in await self.db.read(accounts_of, person):
            if (user_id in await self.owner_ids(platform)) != owner and platform != "local":
                log.warning("%s's linked accounts no longer have one role: not followed", person)
                return None
        return person
