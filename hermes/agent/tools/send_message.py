"""send_message: send text to a chat, named strictly as platform:chat_id[:thread_id].
A user who is not an owner may send only to the chat they are in.

The message goes into the outbox (split for the platform, one row per chunk) and
out through the Outbox actor, like every other send; the tool returns the rows.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import attrs

from hermes.adapters.contract import Target
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import enqueue
from hermes.delivery.split import chunks_for
from hermes.delivery.targets import parse_target


def sendable(ctx: ToolContext, target: str, what: str) -> Target:
    """`target` (platform:chat_id[:thread_id]) as a chat of a configured platform that this
    caller may send `what` to: any, for an owner; the chat they are in, for a user."""
    where = parse_target(target)
    if where is None:
        raise ToolError(f"target {target!r} must be platform:chat_id[:thread_id]")
    if where.platform not in ctx.platforms:
        known = ", ".join(sorted(ctx.platforms))
        raise ToolError(f"no platform {where.platform!r} is configured (configured: {known})")
    origin = ctx.origin
    here = origin is not None and (origin.platform, origin.chat_id) == (
        where.platform,
        where.chat_id,
    )
    if not ctx.caller.is_owner and not here:
        raise ToolError(f"you may send {what} only to the chat you are in")
    return where


@attrs.frozen
class SendMessageTool:
    name = "send_message"
    description = "Send a message to a chat: target is platform:chat_id or platform:chat_id:thread."
    parameters = obj(["target", "text"], target={"type": "string"}, text={"type": "string"})

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        where = sendable(ctx, need(args, "target"), "messages")
        platform = where.platform
        text = need(args, "text")
        key = f"send:{ctx.session_id}:{secrets.token_hex(6)}"
        chunks = chunks_for(text, platform)
        rows = await ctx.db.write(
            enqueue, where, chunks, "send", key, ctx.clock.now(), origin=ctx.session_id
        )
        nudge(ctx.outbox)
        return json.dumps({"queued": True, "outbox_rows": rows})
