"""The serve tree's state: each actor, its run state, restarts and mailbox depth."""

from __future__ import annotations

from hermes.actors.snapshot import Snapshot
from hermes.operations.context import NoArgs, Operation, Ops


async def tree_status(ops: Ops, args: NoArgs) -> Snapshot:
    return ops.live.snapshot()


OPERATIONS = (Operation("status", NoArgs, Snapshot, tree_status),)
