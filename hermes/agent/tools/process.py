"""process: look after background processes started with terminal(background=true).

A process runs where it was started (the sandbox, for a user's), and so do the text
written to it and its kill. Text written to a background shell is judged by the guard as
a command is: a blocked line is refused, a guarded one asked of an owner. A user reaches
only the processes they started in their conversation.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.asking import approval
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.agent.tools.terminal import placed
from hermes.terminal.background import Kill, ListProcs, Log, Poll, WriteStdin, wait_for
from hermes.terminal.guards import judge


@attrs.frozen
class ProcessTool:
    name = "process"
    description = "List, poll, read the log of, wait for, kill, or write to a background process."
    parameters = obj(
        ["action"],
        action={"type": "string", "enum": ["list", "poll", "log", "wait", "kill", "write"]},
        id={"type": "string"},
        offset={"type": "integer"},
        limit={"type": "integer"},
        timeout={"type": "number"},
        data={"type": "string"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.background is None:
            raise ToolError("background processes are not available here")
        action = need(args, "action")
        procs = ctx.background
        if action == "list":
            result: Any = await procs.call(ListProcs(owner=ctx.session_id))
            return json.dumps([p for p in result if _theirs(p, ctx)])
        if action not in ("poll", "log", "wait", "kill", "write"):
            raise ToolError(f"unknown action {action!r}")
        ref = need(args, "id")
        polled = await procs.call(Poll(ref))
        if not _theirs(polled, ctx):
            raise ToolError(f"no background process {ref!r}")  # another's: not shown
        if action == "poll":
            result = polled
        elif action == "log":
            result = await procs.call(Log(ref, args.get("offset", 0), args.get("limit")))
        elif action == "wait":
            result = await wait_for(procs, ref, float(args.get("timeout", 60)))
        elif action == "kill":
            await procs.call(Kill(ref))
            result = {"killed": ref}
        else:
            data = need(args, "data")
            refused = await _judged(data, ctx, polled)
            if refused is not None:
                return refused
            result = {"written": await procs.call(WriteStdin(ref, data))}
        return json.dumps(result)


def _theirs(proc: dict[str, Any], ctx: ToolContext) -> bool:
    """An owner reaches every process; a user those they started in this conversation (in
    one many share, never the owner's)."""
    if ctx.caller.is_owner:
        return True
    return proc["owner"] == ctx.session_id and proc["by"] == ctx.caller.key


async def _judged(data: str, ctx: ToolContext, proc: dict[str, Any]) -> str | None:
    """Text for a background shell, judged as a command and placed as one: None when it
    may be written. A turn that must run its commands confined writes to no process that
    runs unconfined (or asks an owner first, where it would ask for a command)."""
    verdict = judge(data, background=True)
    if verdict.action == "block":
        raise ToolError(f"not written: blocked: {verdict.reason}")
    placement = placed(ctx)
    reasons = [verdict.reason] if verdict.action == "approve" else []
    unconfined = proc["ran_in"] != "sandbox"
    if unconfined and placement.confined:
        raise ToolError(
            f"not written: {proc['id']} runs unconfined ({proc['ran_in']}) and"
            f" this turn's commands run confined ({placement.why})"
        )
    if unconfined and placement.ask:
        reasons.append(f"{proc['id']} runs unconfined ({proc['ran_in']}): {placement.why}")
    return await approval(ctx, data, reasons, proc["cwd"])
