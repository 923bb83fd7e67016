"""terminal: run a shell command in the session's terminal (or in the background)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.terminal.background import Start


@attrs.frozen
class TerminalTool:
    name = "terminal"
    description = (
        "Run a bash command. The working directory persists between calls. "
        "Long-running commands (servers, watchers) need background=true."
    )
    parameters = obj(
        ["command"],
        command={"type": "string"},
        timeout={"type": "number", "description": "seconds, default 180, at most 600"},
        background={"type": "boolean"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        command = need(args, "command")
        if args.get("background"):
            if ctx.background is None:
                raise ToolError("background processes are not available here")
            started = await ctx.background.call(
                Start(
                    command,
                    ctx.terminal.cwd,
                    ctx.terminal.env,
                    owner=ctx.session_id,
                    secrets=tuple(ctx.terminal.redactor_secrets),
                )  # fmt: skip
            )
            return json.dumps({"started": started["id"], "pid": started["pid"]})
        result = await ctx.terminal.run(command, timeout=args.get("timeout"))
        return json.dumps(
            {
                "exit_code": result.exit_code,
                "status": result.status,
                "output": result.output,
                **({"error": result.error} if result.error else {}),
                **({"full_output": result.full_output_path} if result.full_output_path else {}),
            }
        )
