"""Approvals: list the requests that wait, approve or deny one by id.

The chat's buttons and `/approve` `/deny`, `hermes approvals` and the
dashboard all decide through these; the waiting turn in serve is woken at once
(Live.approval_decided). Deciding with no serve running changes the row only:
no turn waits then (a restart expires what was pending).
"""

from __future__ import annotations

import attrs

from hermes.config import not_blank
from hermes.operations.context import Ops
from hermes.state.approvals import Approval, approvals, decide


@attrs.frozen
class ListArgs:
    all: bool = False  # the latest requests however they ended, not only the pending


@attrs.frozen
class DenyArgs:
    id: str = attrs.field(validator=not_blank)


@attrs.frozen
class ApproveArgs:
    id: str = attrs.field(validator=not_blank)
    always: bool = False  # this exact command, for the rest of its session, without asking


async def list_approvals(ops: Ops, args: ListArgs) -> list[Approval]:
    return await ops.db.read(approvals, not args.all)


async def _decide(ops: Ops, request_id: str, approve: bool, always: bool) -> Approval:
    now = ops.clock.now()
    decided = await ops.db.write(decide, request_id.strip().lower(), approve, ops.by, now, always)
    await ops.live.approval_decided(decided.id)
    return decided


async def approve_request(ops: Ops, args: ApproveArgs) -> Approval:
    return await _decide(ops, args.id, True, args.always)


async def deny_request(ops: Ops, args: DenyArgs) -> Approval:
    return await _decide(ops, args.id, False, False)
