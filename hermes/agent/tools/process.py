"""process: look after background processes started with terminal(background=true)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.terminal.background import Kill, ListProcs, Log, Poll, WriteStdin, wait_for


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
        elif action == "poll":
            result = await procs.call(Poll(need(args, "id")))
        elif action == "log":
            result = await procs.call(
                Log(need(args, "id"), args.get("offset", 0), args.get("limit"))
            )
        elif action == "wait":
            result = await wait_for(procs, need(args, "id"), float(args.get("timeout", 60)))
        elif action == "kill":
            await procs.call(Kill(need(args, "id")))
            result = {"killed": args["id"]}
        elif action == "write":
            result = {"written": await procs.call(WriteStdin(need(args, "id"), need(args, "data")))}
        else:
            raise ToolError(f"unknown action {action!r}")
        return json.dumps(result)
