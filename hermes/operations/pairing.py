"""Pairing: list who waits and who is in, approve by code, deny, revoke.

Approval takes the code the user was sent, never a name or id from the list:
a stranger picks their own display name, and a lookalike must not get in. It
makes an owner only when asked (`owner`), and refuses to while config names
owners, before the code is tried: config alone says who they are then.
Serve reads the approved users for every message, so a change here takes
effect at the next message without anyone being told.
"""

from __future__ import annotations

import attrs

from hermes.actors.errors import Invalid, NotFound, Throttled
from hermes.agent.settings import Settings
from hermes.config import not_blank
from hermes.operations.context import NoArgs, Operation, Ops
from hermes.state.db import Db
from hermes.state.pairing import (
    Approved,
    PendingRequest,
    approved,
    attempt_approval,
    deny_request,
    pending,
    revoke,
)


def owner_settings(config: Settings, platform: str) -> list[str]:
    """The settings that name owners of `platform`. While any does, config alone says
    who they are: pairing's owners are not owners there, and none is approved."""
    section = config.platforms.get(platform)
    owned = section is not None and section.named_owners()
    named = [f"platforms.{platform}.owner"] if owned else []
    return named + (["gateway.owners"] if config.gateway.owners else [])


class PairingRefused(NotFound):
    """A wrong, expired or used code (each counts toward the lockout)."""


class OwnerInConfig(Invalid):
    """An approval as owner where config names the platform's owners."""


class PairingLocked(Throttled):
    """Approvals on a platform are locked after too many failed ones."""

    def __init__(self, message: str, until: float) -> None:
        super().__init__(message)
        self.until = until


@attrs.frozen
class PairingList:
    pending: list[PendingRequest]
    approved: list[Approved]


@attrs.frozen
class ApproveArgs:
    platform: str = attrs.field(validator=not_blank)
    code: str = attrs.field(validator=not_blank)
    owner: bool = False  # an owner of the platform too (only where config names none)


@attrs.frozen
class UserArgs:
    platform: str = attrs.field(validator=not_blank)
    user: str = attrs.field(validator=not_blank)


@attrs.frozen
class ApprovedUser:
    platform: str
    user_id: str
    user_name: str | None
    owner: bool  # approved as an owner of the platform


@attrs.frozen
class Done:
    """A change that has nothing to report but that it happened."""

    platform: str
    user: str


async def approve_code(
    db: Db, platform: str, code: str, now: float, by: str = "cli", owner: bool = False
) -> Approved:
    """The approval's write, then its refusal raised once the failure has committed."""
    result = await db.write(attempt_approval, platform, code, now, by, owner)
    if isinstance(result, Approved):
        return result
    if result.locked_until is not None:
        raise PairingLocked(result.reason, result.locked_until)
    raise PairingRefused(result.reason)


async def list_pairing(ops: Ops, args: NoArgs) -> PairingList:
    """Who waits and who is in; `owner` as it counts now (not where config names owners)."""
    now = ops.clock.now()
    people = [
        attrs.evolve(a, owner=a.owner and not owner_settings(ops.config, a.platform))
        for a in await ops.db.read(approved)
    ]
    return PairingList(await ops.db.read(pending, now), people)


async def approve_pairing(ops: Ops, args: ApproveArgs) -> ApprovedUser:
    """Refused as owner before the code is tried: the code stays good, no failure counts."""
    settings = owner_settings(ops.config, args.platform) if args.owner else []
    if settings:
        verb = "names" if len(settings) == 1 else "name"
        raise OwnerInConfig(
            f"{' and '.join(settings)} {verb} the owners of {args.platform}, so pairing makes"
            " none there: approve them as a user, or name them an owner in config.yaml"
        )
    now = ops.clock.now()
    done = await approve_code(ops.db, args.platform, args.code, now, ops.by, args.owner)
    await ops.live.pairing_changed()
    return ApprovedUser(done.platform, done.user_id, done.user_name, done.owner)


async def deny_pairing(ops: Ops, args: UserArgs) -> Done:
    if not await ops.db.write(deny_request, args.platform, args.user):
        raise NotFound(f"no pending request from {args.platform} user {args.user}")
    return Done(args.platform, args.user)


async def revoke_pairing(ops: Ops, args: UserArgs) -> Done:
    if not await ops.db.write(revoke, args.platform, args.user):
        raise NotFound(
            f"{args.platform} user {args.user} is not approved by pairing"
            " (allowlists in config.yaml are edited there)"
        )
    return Done(args.platform, args.user)


OPERATIONS = (
    Operation("pairing.list", NoArgs, PairingList, list_pairing),
    Operation("pairing.approve", ApproveArgs, ApprovedUser, approve_pairing, changes=True),
    Operation("pairing.deny", UserArgs, Done, deny_pairing, changes=True),
    Operation("pairing.revoke", UserArgs, Done, revoke_pairing, changes=True),
)
