"""Who is an owner: the one rule, asked for every turn and every admin command.

Owners on a platform: the local endpoint's token holder, the users
`gateway.owners` names (on every platform), the user the platform's config
names as `owner`, else the first user approved by pairing there. Everyone
else who is let in is a user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hermes.adapters.contract import InboundEvent
from hermes.config import Config, Role

OwnersOf = Callable[[str], Awaitable[frozenset[str]]]  # a platform's owners by pairing


async def role_of(event: InboundEvent, config: Config, owners_of: OwnersOf) -> Role:
    """`owners_of` is asked only when config does not settle it (the router keeps its
    answers between its housekeeping rounds: hermes/gateway/router.py)."""
    if event.platform == "local":
        return "owner"
    return (
        "owner" if event.user_id in await owner_ids(event.platform, config, owners_of) else "user"
    )


async def owner_ids(platform: str, config: Config, owners_of: OwnersOf) -> frozenset[str]:
    """The owners of `platform` as user ids: `gateway.owners`, and the platform's
    configured `owner`, else those pairing made owners there."""
    configured = config.platforms.get(platform)
    named = configured.owner if configured is not None else None
    mine = frozenset({named}) if named else await owners_of(platform)
    return frozenset(config.gateway.owners) | mine
