"""terminal: run a shell command in the session's terminal (or in the background).

Where it runs is its placement (hermes.terminal.placement): a user's always in the
sandbox, an owner's on the backend unless the turn's context holds untrusted text. A
command the guard holds for approval, or an owner's that would run unconfined after the
turn read untrusted text (`terminal.after_untrusted: approve`), is asked of an owner
where the turn has someone to ask (ctx.approver): the turn waits, and the command runs
only on a yes. Elsewhere (a cron job) the model is told it needs approval.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.asking import approval
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.terminal.background import Start
from hermes.terminal.guards import judge
from hermes.terminal.placement import Placement


def placed(ctx: ToolContext) -> Placement:
    """Where the caller's next command runs; ToolError where it cannot run at all. A
    command confined because of the turn's untrusted text says so in its tool line."""
    placement = ctx.terminal.backends.place(ctx.caller.role, ctx.untrusted)
    if placement.backend is None:
        raise ToolError(f"commands cannot run here: {placement.why}")
    if placement.why and not placement.ask:
        ctx.note(placement.why)
    return placement


@attrs.frozen
class TerminalTool:
    name = "terminal"
    description = (
        "Run a bash command. The working directory persists between calls. "
        "Long-running commands (servers, watchers) need background=true. "
        "A guarded command (sudo, ...) waits for an owner's approval."
    )
    parameters = obj(
        ["command"],
        command={"type": "string"},
        timeout={"type": "number", "description": "seconds, default 180, at most 600"},
        background={"type": "boolean"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        command = need(args, "command")
        background = bool(args.get("background"))
        if background and ctx.background is None:
            raise ToolError("background processes are not available here")
        placement = placed(ctx)
        assert placement.backend is not None
        reasons = []
        verdict = judge(command, background=True)  # for a human
        # A yes would let it run (not a foreground command that never ends).
        runs_on_yes = judge(command, background=background, approved=True).action == "allow"
        if verdict.action == "approve" and runs_on_yes and ctx.approver is not None:
            reasons.append(verdict.reason)
        if placement.ask and runs_on_yes:
            reasons.append(f"it would run unconfined ({placement.backend.name}): {placement.why}")
        cwd = ctx.terminal.cwd_in(placement.backend)
        refused = await approval(ctx, command, reasons, cwd)
        if refused is not None:
            return refused
        approved = bool(reasons)
        where = {"ran_in": placement.backend.name}
        if background:
            launch = ctx.terminal.launch(command, placement, stdin=True)
            started = await ctx.background.call(
                Start(
                    command,
                    launch,
                    owner=ctx.session_id,
                    ran_in=placement.backend.name,
                    cwd=cwd,
                    by=ctx.caller.key,
                    approved=approved,
                    secrets=tuple(ctx.terminal.redactor_secrets),
                )
            )
            return json.dumps({"started": started["id"], "pid": started["pid"], **where})
        result = await ctx.terminal.run(
            command, placement=placement, timeout=args.get("timeout"), approved=approved
        )
        return json.dumps(
            {
                "exit_code": result.exit_code,
                "status": result.status,
                "output": result.output,
                **where,
                **({"why": placement.why} if placement.why else {}),
                **({"error": result.error} if result.error else {}),
                **({"full_output": result.full_output_path} if result.full_output_path else {}),
            }
        )
