"""terminal: run a shell command in the session's terminal (or in the background).

A command the guard holds for approval is asked of an owner where the turn has
someone to ask (ctx.approver): the turn waits, and the command runs only on a
yes. Elsewhere (a cron job) the model is told it needs approval.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.state.approvals import APPROVED, CANCELLED, DENIED, EXPIRED, Approval
from hermes.terminal.background import Start
from hermes.terminal.guards import judge


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
        approved = False
        if (
            ctx.approver is not None
            and (verdict := judge(command, background=True)).action == "approve"  # for a human
            # and a yes would let it run (not a foreground command that never ends)
            and judge(command, background=background, approved=True).action == "allow"
        ):
            request = await ctx.approver.ask(ctx, command, verdict.reason)
            if request.state != APPROVED:
                return json.dumps({"status": request.state, "error": not_run(request)})
            approved = True
        if background:
            started = await ctx.background.call(
                Start(
                    command,
                    ctx.terminal.cwd,
                    ctx.terminal.env,
                    owner=ctx.session_id,
                    approved=approved,
                    secrets=tuple(ctx.terminal.redactor_secrets),
                )  # fmt: skip
            )
            return json.dumps({"started": started["id"], "pid": started["pid"]})
        result = await ctx.terminal.run(command, timeout=args.get("timeout"), approved=approved)
        return json.dumps(
            {
                "exit_code": result.exit_code,
                "status": result.status,
                "output": result.output,
                **({"error": result.error} if result.error else {}),
                **({"full_output": result.full_output_path} if result.full_output_path else {}),
            }
        )
