"""Who is an owner: the one rule, asked for every turn and every admin command.

Owners on a platform: the local endpoint's token holder, the users
`gateway.owners` names there (`platform:id`), and the user the platform's
config names as `owner`. Only where config names no owner at all (neither
setting), the users `hermes pairing approve --owner` made owners there.
Everyone else who is let in is a user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hermes.adapters.contract import InboundEvent
from hermes.config import Role
from hermes.gateway.settings import Config
from hermes.operations.pairing import owner_settings

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
    """The owners of `platform` as user ids: those config names, else (config names
    nobody) those pairing made owners there."""
    if not owner_settings(config, platform):
        return await owners_of(platform)
    section = config.platforms.get(platform)
    named = section.named_owners() if section is not None else frozenset()
    return config.gateway.owners_on(platform) | named
