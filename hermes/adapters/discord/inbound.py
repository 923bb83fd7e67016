"""Discord dispatches as the gateway's InboundEvents: MESSAGE_CREATE, and the button
presses of INTERACTION_CREATE.

A message without a guild is a DM (always ours); in a guild channel the bot is
mentioned when it is in `mentions` or the message replies to one of its own.
The guild is the scope; a thread is a channel of its own on Discord, so its
messages carry the thread's channel id. Bots (this one included) are skipped.
The event id is the message id: a dispatch replayed after a Resume is the same.

A button press is the button's command (its custom_id) sent by whoever pressed it, in
the chat of the message that carries the button, addressed to the bot and answering
that message. Its event id is the interaction's id, prefixed so that it never meets a
message's.
"""

from __future__ import annotations

import re
from typing import Any

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS
from hermes.adapters.url_media import UrlRef


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
        attachments=_attachments(message.get("attachments")),
    )


def _attachments(found: Any) -> tuple[str, ...]:
    """References to a message's attachments (their signed CDN links), fetched only once
    the event is authorized."""
    refs = []
    for item in (found if isinstance(found, list) else [])[:MAX_ATTACHMENTS]:
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            size = item.get("size")
            refs.append(
                UrlRef(
                    item["url"],
                    str(item.get("filename") or "attachment"),
                    size if isinstance(size, int) else None,
                    item.get("content_type"),
                ).to_text()
            )
    return tuple(refs)


def pressed(interaction: dict[str, Any], platform: str = "discord") -> InboundEvent | None:
    """A button press (an interaction of type 3) as the event of its command; None for
    one without a command, a presser or a chat to place it in."""
    data = interaction.get("data") or {}
    command = str(data.get("custom_id") or "").strip()
    guild = interaction.get("guild_id")
    user = (interaction.get("member") or {}).get("user") if guild else None
    user = user or interaction.get("user") or {}
    channel = interaction.get("channel_id") or (interaction.get("channel") or {}).get("id")
    if not command or not user.get("id") or not channel or not interaction.get("id"):
        return None
    message = (interaction.get("message") or {}).get("id")
    return InboundEvent(
        platform=platform,
        event_id=f"interaction-{interaction['id']}",
        chat_type=ChatType.DM if guild is None else ChatType.GROUP,
        chat_id=str(channel),
        user_id=str(user["id"]),
        text=command,
        scope_id=str(guild) if guild else None,
        user_name=user.get("username"),
        message_id=str(message) if message else None,
        reply_to=str(message) if message else None,
        mentioned=True,
    )
