"""memory: add, replace or remove entries of MEMORY.md and USER.md."""

from __future__ import annotations

from typing import Any

import attrs

from hermes.agent.memory import MemoryRefused
from hermes.agent.tools.asking import lasting
from hermes.agent.tools.base import ToolContext, ToolError, need, obj


@attrs.frozen
class MemoryTool:
    name = "memory"
    description = (
        "Keep notes across conversations: target 'memory' for your own notes, 'user' for "
        "facts about the user. Both are shown to you at the start of every conversation."
    )
    parameters = obj(
        ["action", "target"],
        action={"type": "string", "enum": ["add", "replace", "remove"]},
        target={"type": "string", "enum": ["memory", "user"]},
        text={"type": "string"},
        old={"type": "string", "description": "part of the entry to replace or remove"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        action, target = need(args, "action"), need(args, "target")
        if action in ("add", "replace"):
            said = f"memory {action} ({target}): {need(args, 'text')}"
            refused = await lasting(ctx, "what memory keeps", said)
            if refused is not None:
                return refused
        try:
            if action == "add":
                return ctx.memory.add(target, need(args, "text"))
            if action == "replace":
                return ctx.memory.replace(target, need(args, "old"), need(args, "text"))
            if action == "remove":
                return ctx.memory.remove(target, need(args, "old"))
        except MemoryRefused as exc:
            raise ToolError(str(exc)) from None
        raise ToolError(f"unknown action {action!r}")
