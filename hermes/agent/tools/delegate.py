"""delegate_task: hand parts of a long task to subagents that work in parallel, each with
a conversation and tools of its own, and report back (hermes.agent.delegation)."""

from __future__ import annotations

from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, obj

TASK = obj(
    ["goal"],
    goal={"type": "string", "description": "what the subagent is to do, in full"},
    context={"type": "string", "description": "what it needs to know: it sees nothing else"},
    tools={
        "type": "array",
        "items": {"type": "string"},
        "description": "the tools it may use (default: all it may have)",
    },
)


@attrs.frozen
class DelegateTool:
    name = "delegate_task"
    description = (
        "Hand independent parts of a long task to subagents that work at once, each with"
        " its own conversation (only the goal and context you give it) and a subset of your"
        " tools; you get each one's answer, or why it has none. Use it for parts that need"
        " much reading or many steps, not for one quick lookup."
    )
    parameters = obj(
        [], tasks={"type": "array", "items": TASK, "description": "the tasks"}, **TASK["properties"]
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.delegation is None:
            raise ToolError("there is nobody to delegate to in this turn")
        return await ctx.delegation.run(ctx, args)
