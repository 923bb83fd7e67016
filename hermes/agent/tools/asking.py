"""Asking an owner before a tool acts: what the guard holds, what would run unconfined
after untrusted text, and what an owner's turn that read untrusted text would write to
last beyond it (a scheduled job, memory). The turn waits in its cancel scope for the
owner's decision (hermes.gateway.approvals); where nobody can be asked (a cron fire) the
model is told it needs approval."""

from __future__ import annotations

import json

from hermes.agent.tools.base import ToolContext
from hermes.state.approvals import APPROVED, CANCELLED, DENIED, EXPIRED, Approval


def not_run(request: Approval) -> str:
    """The one line the model is told when an owner's yes did not come."""
    why = {
        DENIED: f"an owner ({request.decided_by}) denied it",
        EXPIRED: "no owner answered in time; the request expired"
        if request.decided_by is None
        else f"the request expired ({request.decided_by})",
        CANCELLED: f"the request was cancelled ({request.decided_by or 'the turn was stopped'})",
    }[request.state]
    return f"not run: {why} (approval {request.id}). Do not try to get around the guard."


async def approval(ctx: ToolContext, text: str, reasons: list[str], cwd: str) -> str | None:
    """Ask an owner about `text` for `reasons` where someone can be asked: None when it may
    run (a yes, or nothing to ask), else what the model is told instead."""
    if not reasons:
        return None
    if ctx.approver is None:
        return json.dumps(
            {"status": "pending_approval", "error": f"needs approval: {'; '.join(reasons)}"}
        )
    request = await ctx.approver.ask(ctx, text, "; ".join(reasons), cwd)
    if request.state != APPROVED:
        return json.dumps({"status": request.state, "error": not_run(request)})
    return None


async def lasting(ctx: ToolContext, what: str, text: str) -> str | None:
    """An owner's write that outlives the turn (`what`: a job, memory), described by
    `text`, in a turn whose context holds untrusted text: asked of an owner first, as a
    command that would run unconfined is, unless `terminal.after_untrusted` is `host`.
    None when it may be written, else what the model is told."""
    if not ctx.caller.is_owner or ctx.untrusted is None:
        return None
    if ctx.terminal.backends.config.after_untrusted == "host":
        return None
    why = f"{what} outlives this conversation, which holds untrusted text ({ctx.untrusted})"
    return await approval(ctx, text, [why], str(ctx.terminal.workdir))
