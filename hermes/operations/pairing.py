"""Pairing: list who waits and who is in, approve by code, deny, revoke.

Approval takes the code the user was sent, never a name or id from the list:
a stranger picks their own display name, and a lookalike must not get in.
Serve reads the approved users for every message, so a change here takes
effect at the next message without anyone being told.
"""

from __future__ import annotations

import attrs

from hermes.actors.errors import NotFound, Throttled
from hermes.config import not_blank
from hermes.operations.context import NoArgs, Ops
from hermes.state.db import Db
from hermes.state.pairing import (
    Approved,
    PendingRequest,
    approved,
    attempt_approval,
    deny_request,
    owner_rule,
    pending,
    revoke,
)


class PairingRefused(NotFound):
    """A wrong, expired or used code (each counts toward the lockout)."""


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


@attrs.frozen
class UserArgs:
    platform: str = attrs.field(validator=not_blank)
    user: str = attrs.field(validator=not_blank)


@attrs.frozen
class ApprovedUser:
    platform: str
    user_id: str
    user_name: str | None
    owner: bool  # the platform's owner: by config, or the first one pairing let in


@attrs.frozen
class Done:
    """A change that has nothing to report but that it happened."""

    platform: str
    user: str


async def approve_code(db: Db, platform: str, code: str, now: float, by: str = "cli") -> Approved:
    """The approval's write, then its refusal raised once the failure has committed."""
    result = await db.write(attempt_approval, platform, code, now, by)
    if isinstance(result, Approved):
        return result
    if result.locked_until is not None:
        raise PairingLocked(result.reason, result.locked_until)
    raise PairingRefused(result.reason)


async def list_pairing(ops: Ops, args: NoArgs) -> PairingList:
    now = ops.clock.now()
    return PairingList(await ops.db.read(pending, now), await ops.db.read(approved))


async def approve_pairing(ops: Ops, args: ApproveArgs) -> ApprovedUser:
    done = await approve_code(ops.db, args.platform, args.code, ops.clock.now(), ops.by)
    await ops.live.pairing_changed()
    named = ops.config.platforms.get(done.platform)
    owner = owner_rule(named.owner if named else None, done.user_id, done.owner)
    return ApprovedUser(done.platform, done.user_id, done.user_name, owner)


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
