"""A Telegram update as the gateway's InboundEvent, and the media it carries.

Private chats are DMs; groups and supergroups are groups (the intake applies the
group's `groups.activation`); a forum topic is a thread (`message_thread_id`, in a forum
only: elsewhere Telegram uses it for reply chains, which are not threads). A
caption is the text of a photo or document. (A topic message says so:
`is_topic_message`.) The bot is mentioned by
`@username`, a text mention of its id, a `/command@username`, or a reply to
one of its messages. Entity offsets count UTF-16 code units.

A button press (a `callback_query`) is the button's command (its `callback_data`)
sent by whoever pressed it, in the chat (and topic) of the message that carries the
button, addressed to the bot and answering that message. Its event id is the callback
query's id, prefixed so that it never meets an update_id: the same press delivered
again is the same event.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.adapters.contract import ChatType, InboundEvent

CHAT_TYPES = {"private": ChatType.DM, "group": ChatType.GROUP, "supergroup": ChatType.GROUP}


@attrs.frozen
class Bot:
    id: int
    username: str


@attrs.frozen
class MediaRef:
    """A file a message carries, fetched with getFile once the event is authorized. It
    travels in the event's `attachments` as text (`to_text`), through the journal."""

    file_id: str
    unique_id: str
    size: int | None
    suffix: str

    def to_text(self) -> str:
        return json.dumps([self.file_id, self.unique_id, self.size, self.suffix])

    @classmethod
    def from_text(cls, text: str) -> MediaRef:
        file_id, unique_id, size, suffix = json.loads(text)
        return cls(
            str(file_id), str(unique_id), size if isinstance(size, int) else None, str(suffix)
        )


@attrs.frozen
class Incoming:
    event: InboundEvent
    media: tuple[MediaRef, ...]


def _utf16_slice(text: str, offset: int, length: int) -> str:
    units = text.encode("utf-16-le", "surrogatepass")
    return units[2 * offset : 2 * (offset + length)].decode("utf-16-le", "surrogatepass")


def mentions(message: dict[str, Any], bot: Bot) -> bool:
    reply = message.get("reply_to_message") or {}
    if (reply.get("from") or {}).get("id") == bot.id:
        return True
    text = message.get("text") or message.get("caption") or ""
    entities = message.get("entities") or message.get("caption_entities") or ()
    handle = "@" + bot.username.lower()
    for entity in entities:
        kind = entity.get("type")
        if kind == "text_mention" and (entity.get("user") or {}).get("id") == bot.id:
            return True
        if kind in ("mention", "bot_command"):
            said = _utf16_slice(text, int(entity["offset"]), int(entity["length"])).lower()
            if said == handle or said.endswith(handle) and kind == "bot_command":
                return True
    return False


def _ref(item: dict[str, Any], suffix: str) -> MediaRef:
    size = item.get("file_size")
    return MediaRef(
        item["file_id"],
        item.get("file_unique_id") or item["file_id"],
        size if isinstance(size, int) else None,
        suffix,
    )


def _media(message: dict[str, Any]) -> tuple[MediaRef, ...]:
    found = []
    photos = message.get("photo") or ()
    if photos:
        best = max(photos, key=lambda p: (p.get("file_size") or 0, p.get("width") or 0))
        found.append(_ref(best, ".jpg"))
    for kind, suffix in (
        ("document", ""),
        ("voice", ".ogg"),
        ("audio", ".mp3"),
        ("video", ".mp4"),
        ("video_note", ".mp4"),
    ):
        item = message.get(kind)
        if isinstance(item, dict) and item.get("file_id"):
            name = str(item.get("file_name") or "")
            found.append(_ref(item, "." + name.rsplit(".", 1)[1][:10] if "." in name else suffix))
    return tuple(found)


def topic_of(message: dict[str, Any]) -> str | None:
    """The forum topic a message is in (its thread), or None."""
    chat = message.get("chat") or {}
    if chat.get("is_forum") and message.get("is_topic_message"):
        thread = message.get("message_thread_id")
        return str(thread) if thread is not None else None
    return None


def incoming(update: dict[str, Any], bot: Bot, platform: str = "telegram") -> Incoming | None:
    """None for what the gateway does not take (a channel post, an edit, a service
    message, the bot's own): acknowledged and skipped. Another bot's message goes in
    marked `is_bot` (the group's `groups.bots` decides)."""
    message = update.get("message")
    if not isinstance(message, dict):
        return None
    sender, chat = message.get("from") or {}, message.get("chat") or {}
    chat_type = CHAT_TYPES.get(chat.get("type"))
    if chat_type is None or "id" not in sender or sender.get("id") == bot.id:
        return None
    text = message.get("text") or message.get("caption") or ""
    media = _media(message)
    if not text and not media:
        return None
    reply = message.get("reply_to_message") or {}
    event = InboundEvent(
        platform=platform,
        event_id=str(update["update_id"]),
        chat_type=chat_type,
        chat_id=str(chat["id"]),
        user_id=str(sender["id"]),
        text=text,
        thread_id=topic_of(message),
        user_name=sender.get("username") or sender.get("first_name"),
        message_id=str(message["message_id"]) if "message_id" in message else None,
        reply_to=str(reply["message_id"]) if "message_id" in reply else None,
        mentioned=chat_type is ChatType.DM or mentions(message, bot),
        replied=(reply.get("from") or {}).get("id") == bot.id,
        is_bot=bool(sender.get("is_bot")),
    )
    return Incoming(event, media)


def pressed(query: dict[str, Any], platform: str = "telegram") -> InboundEvent | None:
    """A `callback_query` as the event of its button's command; None for one without a
    command, a presser or a chat to place it in (an inline message's button)."""
    message, sender = query.get("message"), query.get("from") or {}
    command = query.get("data")
    if not isinstance(message, dict) or not command or "id" not in sender or not query.get("id"):
        return None
    chat = message.get("chat") or {}
    chat_type = CHAT_TYPES.get(chat.get("type"))
    if chat_type is None or "id" not in chat or "message_id" not in message:
        return None
    carrier = str(message["message_id"])
    return InboundEvent(
        platform=platform,
        event_id=f"cb-{query['id']}",
        chat_type=chat_type,
        chat_id=str(chat["id"]),
        user_id=str(sender["id"]),
        text=str(command),
        thread_id=topic_of(message),
        user_name=sender.get("username") or sender.get("first_name"),
        message_id=carrier,
        reply_to=carrier,
        mentioned=True,
    )
