"""send_message: send text to a chat, named strictly as platform:chat_id[:thread_id]."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.cron.delivery import PlannedTarget, Target


@attrs.frozen
class SendMessageTool:
    name = "send_message"
    description = "Send a message to a chat: target is platform:chat_id or platform:chat_id:thread."
    parameters = obj(["target", "text"], target={"type": "string"}, text={"type": "string"})

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        target = need(args, "target")
        platform, _, rest = target.partition(":")
        chat, _, thread = rest.partition(":")
        if not platform or not chat:
            raise ToolError(f"target {target!r} must be platform:chat_id[:thread_id]")
        planned = PlannedTarget(Target(platform, chat, thread or None), "explicit", False)
        result = await ctx.deliverer.send(planned, need(args, "text"))
        if not result.success:
            raise ToolError(f"not sent: {result.error}")
        return json.dumps({"sent": True, "message_id": result.message_id})
