"""A verified activity as the gateway's InboundEvent.

A `message` activity is a user's message: in a personal chat (a DM), a group chat or a
channel (answered there on mention: an `entities[]` item of type `mention` naming the
bot, `recipient.id`; its `<at>Name</at>` is taken out of the text). In a channel every
post is the root of a reply chain: `conversation.id` is `<channel>;messageid=<root>`, and
the root is the event's thread, so a chain is a session's thread. A press of an Adaptive
Card's Action.Submit comes as a `message` with the action's `data` in `value` and no
text: our buttons' data is `{"hermes": <command>}`, admitted as that command, mentioned.

The event id is the conversation and the activity's id: Teams numbers activities per
conversation (a time in milliseconds), so two chats could share one.

Files a user attaches in a personal chat come as `file.download.info` attachments, with a
pre-authorised download URL; only that is kept as a reference (fetched once the event is
authorized). Inline images and the HTML copy of the text are not read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS

CHAT_TYPES = {"personal": ChatType.DM, "groupChat": ChatType.GROUP, "channel": ChatType.CHANNEL}
THREAD = ";messageid="
DOWNLOAD = "application/vnd.microsoft.teams.file.download.info"
BUTTON_KEY = "hermes"  # an Action.Submit's data: {"hermes": command}
MAX_TEXT = 64 * 1024  # characters of a message read; the rest is cut


def conversation_of(chat_id: str, thread_id: str | None) -> str:
    """The conversation id a send goes to: a channel's reply chain is its root's."""
    return f"{chat_id}{THREAD}{thread_id}" if thread_id else chat_id


def event_of(activity: dict[str, Any], platform: str) -> InboundEvent | None:
    """The event of a `message` activity; None for one hermes does not take (no id, no
    conversation, no sender, or nothing in it)."""
    conversation = _dict(activity.get("conversation"))
    sender, bot = _dict(activity.get("from")), _dict(activity.get("recipient"))
    activity_id, conversation_id = activity.get("id"), conversation.get("id")
    user = sender.get("id")
    if not all(isinstance(v, str) and v for v in (activity_id, conversation_id, user)):
        return None
    chat, _, thread = str(conversation_id).partition(THREAD)
    chat_type = CHAT_TYPES.get(str(conversation.get("conversationType")), ChatType.GROUP)
    pressed = _pressed(activity.get("value"))
    text, mentioned = _text(activity, str(bot.get("id") or ""))
    if pressed is not None:
        text, mentioned = pressed, True
    attachments = _files(activity.get("attachments")) if chat_type is ChatType.DM else ()
    if not text and not attachments:
        return None
    tenant = _dict(_dict(activity.get("channelData")).get("tenant")).get("id")
    return InboundEvent(
        platform,
        f"{conversation_id}/{activity_id}",
        chat_type,
        chat,
        str(user),
        text,
        scope_id=str(tenant) if tenant else None,
        thread_id=thread or None,
        user_name=_str(sender.get("name")),
        is_bot=sender.get("role") == "bot" or str(user).startswith("28:"),
        message_id=str(activity_id),
        reply_to=_str(activity.get("replyToId")),
        mentioned=mentioned or chat_type is ChatType.DM,
        attachments=attachments,
    )


def _text(activity: dict[str, Any], bot_id: str) -> tuple[str, bool]:
    """The message's text without the bot's mention, and whether it mentioned the bot."""
    text = str(activity.get("text") or "")[:MAX_TEXT]
    mentioned = False
    for entity in activity.get("entities") or ():
        if not isinstance(entity, dict) or entity.get("type") != "mention":
            continue
        if not bot_id or _dict(entity.get("mentioned")).get("id") != bot_id:
            continue
        mentioned = True
        said = entity.get("text")
        if isinstance(said, str) and said in text:
            text = text.replace(said, "", 1)
        else:  # its entity says other words than the text shows: the first <at>...</at>
            text = re.sub(r"<at>[^<]{0,200}</at>", "", text, count=1)
    return text.strip(), mentioned


def _pressed(value: Any) -> str | None:
    """The command of our button a press carries (its `value`), else None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    command = value.get(BUTTON_KEY) if isinstance(value, dict) else None
    return command if isinstance(command, str) and command.startswith("/") else None


def _files(attachments: Any) -> tuple[str, ...]:
    """Download references `name|url` of the files a personal chat's message carries."""
    found = []
    for item in attachments if isinstance(attachments, list) else ():
        if not isinstance(item, dict) or item.get("contentType") != DOWNLOAD:
            continue
        url = _dict(item.get("content")).get("downloadUrl")
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            name = str(item.get("name") or "file").replace("|", "_")
            found.append(f"{name}|{url}")
    return tuple(found[:MAX_ATTACHMENTS])


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
