"""Approvals: list the requests that wait, approve or deny one by id.

The chat's buttons and `/approve` `/deny`, `hermes approvals` and the
dashboard all decide through these. A request is decided only while a turn in
serve waits on it, and that turn goes on at once (Live.approval_decided): with
no serve, or after the serve that asked has gone, nothing would ever run it, so
a yes there would be a record of something that never happened.
"""

from __future__ import annotations

import attrs

from hermes.actors.errors import Invalid
from hermes.config import not_blank
from hermes.operations.context import Operation, Ops
from hermes.state.approvals import (
    PENDING,
    Approval,
    ApprovalEnded,
    approvals,
    decide,
    get_approval,
)


class NobodyWaits(Invalid):
    """A pending request no turn waits on now (no serve runs, or it is another serve's):
    it expires when its serve is gone, and is never run."""


@attrs.frozen
class ListArgs:
    all: bool = False  # the latest requests however they ended, not only the pending


@attrs.frozen
class DenyArgs:
    id: str = attrs.field(validator=not_blank)


@attrs.frozen
class ApproveArgs:
    id: str = attrs.field(validator=not_blank)
    always: bool = False  # this command in this directory, for the rest of its session


async def list_approvals(ops: Ops, args: ListArgs) -> list[Approval]:
    return await ops.db.read(approvals, ops.clock.now(), not args.all)


async def _decide(ops: Ops, request_id: str, approve: bool, always: bool) -> Approval:
    request_id = request_id.strip().lower()
    if not ops.live.waiting_on(request_id):
        found = await ops.db.read(get_approval, request_id)
        if found.state == PENDING:
            raise NobodyWaits(
                f"no turn waits for request {request_id} now (is serve running?);"
                " it expires and never runs"
            )
        raise ApprovalEnded(found)
    now = ops.clock.now()
    decided, done = await ops.db.write(decide, request_id, approve, ops.by, now, always)
    if not done:
        raise ApprovalEnded(decided)
    await ops.live.approval_decided(decided.id)
    return decided


async def approve_request(ops: Ops, args: ApproveArgs) -> Approval:
    return await _decide(ops, args.id, True, args.always)


async def deny_request(ops: Ops, args: DenyArgs) -> Approval:
    return await _decide(ops, args.id, False, False)


OPERATIONS = (
    Operation("approvals.list", ListArgs, list[Approval], list_approvals),
    Operation("approvals.approve", ApproveArgs, Approval, approve_request, changes=True),
    Operation("approvals.deny", DenyArgs, Approval, deny_request, changes=True),
)
