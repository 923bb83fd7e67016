"""Who is an owner: the one rule, asked for every turn and every admin command.

Owners on a platform: the local endpoint's token holder, the users
`gateway.owners` names (on every platform), the user the platform's config
names as `owner`, else the first user approved by pairing there. Everyone
else who is let in is a user.
"""

from __future__ import annotations

from hermes.adapters.contract import InboundEvent
from hermes.config import Config, Role
from hermes.state.db import Db
from hermes.state.pairing import owner_rule, owners


async def role_of(event: InboundEvent, config: Config, db: Db) -> Role:
    if event.platform == "local" or event.user_id in config.gateway.owners:
        return "owner"
    configured = config.platforms.get(event.platform)
    named = configured.owner if configured is not None else None
    first = not named and event.user_id in await db.read(owners, event.platform)
    return "owner" if owner_rule(named, event.user_id, first) else "user"
