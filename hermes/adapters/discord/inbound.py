"""Discord MESSAGE_CREATE dispatches as the gateway's InboundEvents.

A message without a guild is a DM (always ours); in a guild channel the bot is
mentioned when it is in `mentions` or the message replies to one of its own.
The guild is the scope; a thread is a channel of its own on Discord, so its
messages carry the thread's channel id. Bots (this one included) are skipped.
The event id is the message id: a dispatch replayed after a Resume is the same.
"""

from __future__ import annotations

import re
from typing import Any

from hermes.adapters.contract import ChatType, InboundEvent


def incoming(
    message: dict[str, Any], bot_id: str, platform: str = "discord"
) -> InboundEvent | None:
    author = message.get("author") or {}
    if author.get("bot") or not author.get("id") or str(author["id"]) == bot_id:
        return None
    guild = message.get("guild_id")
    mentions = {str(m.get("id")) for m in message.get("mentions") or ()}
    replied = ((message.get("referenced_message") or {}).get("author") or {}).get("id")
    mentioned = guild is None or bot_id in mentions or str(replied) == bot_id
    text = re.sub(rf"<@!?{re.escape(bot_id)}>", "", str(message.get("content") or "")).strip()
    reference = (message.get("message_reference") or {}).get("message_id")
    return InboundEvent(
        platform=platform,
        event_id=str(message["id"]),
        chat_type=ChatType.DM if guild is None else ChatType.GROUP,
        chat_id=str(message["channel_id"]),
        user_id=str(author["id"]),
        text=text,
        scope_id=str(guild) if guild else None,
        user_name=author.get("username"),
        message_id=str(message["id"]),
        reply_to=str(reference) if reference else None,
        mentioned=mentioned,
    )
