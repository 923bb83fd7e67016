"""Every operator action by its name: its arguments' type, its function, and whether it
changes state (a change made from the CLI is sent to a running serve, so the actor
that owns the state acts at once; a read runs on state.db wherever it is asked)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from hermes.actors.snapshot import Snapshot
from hermes.cron.jobs import Job
from hermes.delivery.channels import HomeChannel
from hermes.operations import (
    approvals,
    channels,
    cron,
    identities,
    outbox,
    pairing,
    sessions,
    skills,
    status,
)
from hermes.operations.context import NoArgs, Ops
from hermes.state.approvals import Approval
from hermes.state.identities import Identity
from hermes.state.rows import SessionRow


@attrs.frozen
class Operation:
    name: str
    args: type
    result: Any  # the result's type, to read it back from JSON
    run: Callable[[Ops, Any], Awaitable[Any]]
    changes: bool = False


def _ops(*ops: Operation) -> dict[str, Operation]:
    return {op.name: op for op in ops}


OPERATIONS: dict[str, Operation] = _ops(
    Operation("pairing.list", NoArgs, pairing.PairingList, pairing.list_pairing),
    Operation(
        "pairing.approve",
        pairing.ApproveArgs,
        pairing.ApprovedUser,
        pairing.approve_pairing,
        changes=True,
    ),
    Operation("pairing.deny", pairing.UserArgs, pairing.Done, pairing.deny_pairing, changes=True),
    Operation(
        "pairing.revoke", pairing.UserArgs, pairing.Done, pairing.revoke_pairing, changes=True
    ),
    Operation("identities.list", NoArgs, list[Identity], identities.list_linked),
    Operation(
        "identities.unlink",
        identities.AccountArgs,
        identities.Unlinked,
        identities.unlink_account,
        changes=True,
    ),
    Operation("approvals.list", approvals.ListArgs, list[Approval], approvals.list_approvals),
    Operation(
        "approvals.approve",
        approvals.ApproveArgs,
        Approval,
        approvals.approve_request,
        changes=True,
    ),
    Operation("approvals.deny", approvals.DenyArgs, Approval, approvals.deny_request, changes=True),
    Operation("cron.list", cron.ListArgs, list[Job], cron.list_cron),
    Operation("cron.history", cron.HistoryArgs, cron.History, cron.cron_history),
    Operation("cron.status", NoArgs, cron.CronStatus, cron.cron_status),
    Operation("cron.add", cron.AddArgs, Job, cron.add_cron, changes=True),
    Operation("cron.edit", cron.EditArgs, Job, cron.edit_cron, changes=True),
    Operation("cron.pause", cron.JobArgs, Job, cron.pause_cron, changes=True),
    Operation("cron.resume", cron.JobArgs, Job, cron.resume_cron, changes=True),
    Operation("cron.remove", cron.JobArgs, Job, cron.remove_cron, changes=True),
    Operation("cron.run", cron.RunArgs, cron.Fired, cron.run_cron, changes=True),
    Operation("cron.cancel", cron.CancelArgs, cron.Cancelled, cron.cancel_cron, changes=True),
    Operation("outbox.list", outbox.ListArgs, list[outbox.RowView], outbox.list_outbox),
    Operation("outbox.retry", outbox.RowArgs, outbox.RowState, outbox.retry_outbox, changes=True),
    Operation("outbox.drop", outbox.RowArgs, outbox.RowState, outbox.drop_outbox, changes=True),
    Operation("outbox.purge", NoArgs, outbox.Purged, outbox.purge_outbox, changes=True),
    Operation("sessions.list", sessions.ListArgs, list[SessionRow], sessions.list_session_rows),
    Operation("sessions.show", sessions.ShowArgs, sessions.Transcript, sessions.show_session),
    Operation("sessions.search", sessions.SearchArgs, list[sessions.Hit], sessions.search_sessions),
    Operation("sessions.export", sessions.ExportArgs, sessions.Exported, sessions.export_session),
    Operation("channels", NoArgs, dict[str, HomeChannel], channels.list_channels),
    Operation("status", NoArgs, Snapshot, status.tree_status),
    Operation("context.findings", NoArgs, list[skills.ContextFinding], skills.context_findings),
)
