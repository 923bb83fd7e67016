"""BlueBubbles's messages as the gateway's InboundEvents.

A message comes by the webhook (`new-message`) or by the catch-up's message query: both
are the same object and make the same event, keyed by the message's `guid`, so the
journal admits it once whichever brings it first. Skipped: hermes's own (`isFromMe`),
tapbacks (an `associatedMessageType`), group events (an `itemType` other than 0: a
rename, a member added) and a message with no sender. A chat's guid says its kind:
`iMessage;-;+15551234567` is a DM, `iMessage;+;chat123...` a group. A DM is always for
hermes; in a group it is addressed by one of the configured names, as a word (iMessage
has no mentions for a bot).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS

MAX_TEXT = 20_000  # characters of a message taken; the rest is left unread


@attrs.frozen
class AttachmentRef:
    """An attachment as the event keeps it (in the journal, as JSON): fetched from the
    server by its guid only once the event is authorized."""

    guid: str
    name: str
    mime: str | None
    size: int | None

    def to_text(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> AttachmentRef:
        values = json.loads(text)
        size = values.get("size")
        return cls(
            str(values["guid"]),
            str(values.get("name") or "attachment"),
            values.get("mime"),
            size if isinstance(size, int) else None,
        )


def chat_type(chat: str) -> ChatType:
    """A DM's guid has `;-;` between its service and its address, a group's `;+;`."""
    return ChatType.GROUP if ";+;" in chat else ChatType.DM


def named(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """The names that address hermes in a group, as whole words in any case."""
    if not names:
        return None
    words = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![\w@]){words}(?!\w)", re.IGNORECASE)


def message_event(
    message: dict[str, Any], platform: str, names: re.Pattern[str] | None
) -> InboundEvent | None:
    """The event of a user's message (None: one the gateway does not take)."""
    if message.get("isFromMe") or message.get("associatedMessageType"):
        return None
    if message.get("itemType") not in (None, 0):
        return None
    handle = message.get("handle") if isinstance(message.get("handle"), dict) else {}
    user = str(handle.get("address") or "")
    chats = message.get("chats") if isinstance(message.get("chats"), list) else []
    chat = str(chats[0].get("guid") or "") if chats and isinstance(chats[0], dict) else ""
    if not user or not chat:
        return None
    kind = chat_type(chat)
    text = str(message.get("text") or "")[:MAX_TEXT].replace("\ufffc", "").strip()
    mentioned = kind is ChatType.DM or bool(names and names.search(text))
    return InboundEvent(
        platform=platform,
        event_id=str(message["guid"]),
        chat_type=kind,
        chat_id=chat,
        user_id=user,
        text=text,
        message_id=str(message["guid"]),
        mentioned=mentioned,
        attachments=_attachments(message),
    )


def _attachments(message: dict[str, Any]) -> tuple[str, ...]:
    found = message.get("attachments")
    refs = []
    for item in found[:MAX_ATTACHMENTS] if isinstance(found, list) else []:
        if isinstance(item, dict) and isinstance(item.get("guid"), str):
            size = item.get("totalBytes")
            name = str(item.get("transferName") or "attachment")
            mime = item.get("mimeType") if isinstance(item.get("mimeType"), str) else None
            ref = AttachmentRef(item["guid"], name, mime, size if isinstance(size, int) else None)
            refs.append(ref.to_text())
    return tuple(refs)


def created(message: dict[str, Any]) -> int | None:
    """The message's `dateCreated` (ms), None where it has none."""
    value = message.get("dateCreated")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
