"""Linked accounts: list who is one person on several platforms, unlink an account.

Accounts are linked only from the chats themselves (`/link` on one, `/link CODE`
on the other), so the operator cannot join two accounts by naming them: only
their owner proves both are theirs. Unlinking needs no such proof. Serve reads
the links for every message, so an unlink takes effect at the next message.
"""

from __future__ import annotations

import attrs

from hermes.actors.errors import NotFound
from hermes.config import not_blank
from hermes.operations.context import NoArgs, Operation, Ops
from hermes.state.identities import Identity, list_identities, unlink


class NotLinked(NotFound):
    """The account is linked to no other."""


@attrs.frozen
class AccountArgs:
    platform: str = attrs.field(validator=not_blank)
    user: str = attrs.field(validator=not_blank)  # the platform's user id


@attrs.frozen
class Unlinked:
    platform: str
    user: str


async def list_linked(ops: Ops, args: NoArgs) -> list[Identity]:
    """Every linked account, by person."""
    return await ops.db.read(list_identities)


async def unlink_account(ops: Ops, args: AccountArgs) -> Unlinked:
    """Its person's other accounts stay linked, if two or more are left."""
    if not await ops.db.write(unlink, args.platform, args.user):
        raise NotLinked(f"{args.platform} user {args.user} is not linked to another account")
    return Unlinked(args.platform, args.user)


OPERATIONS = (
    Operation("identities.list", NoArgs, list[Identity], list_linked),
    Operation("identities.unlink", AccountArgs, Unlinked, unlink_account, changes=True),
)
