"""A Matrix room timeline event (from /sync, decrypted already) as the gateway's
InboundEvent, with the file a media message carries as its attachment (media.py), fetched
only once the event is authorized: a stranger's media costs nothing. A media message's
text is its caption, or nothing.

Only `m.room.message` is read; hermes's own events (from any of its devices) and edits
(`m.replace`: the original was answered) are skipped. `m.notice` is Matrix's mark of a
bot's message, so it is taken as a bot's, which the gateway refuses. A thread is its
root's event id; a reply is `m.in_reply_to`, except inside a thread when it only falls
back for clients without threads. In a group hermes is mentioned by `m.mentions`, or,
from clients older than `m.mentions`, by its user id or display name in the body; and
by a reply to one of its own events. An @room ping is not a mention of hermes.

An event is anyone's bytes: what is not the documented shape is skipped, never a crash.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.matrix.media import MEDIA_TYPES, caption_of, media_of

MAX_TEXT = 20_000  # characters of a message the model reads
# The spec's legacy reply fallback opens the body: `> <@sender> first line` (`> * <@sender>`
# for an emote), more `> ` lines, then a blank line before the new words.
_FALLBACK = re.compile(r"> (?:\* )?<@.*(?:\n>.*)*(?:\n\n?|\Z)")


@attrs.frozen
class RoomView:
    """What the caller's sync state knows of the room: hermes's user id and display name
    there, whether it is a DM, and the events hermes sent there lately (a reply to one of
    them is addressed to hermes)."""

    me: str
    my_name: str | None
    direct: bool
    my_events: frozenset[str]


def read_event(
    event: dict[str, Any], room_id: str, room: RoomView, platform: str
) -> InboundEvent | None:
    """None for an event hermes does not take (not a message, its own, an edit, malformed)."""
    if not isinstance(event, dict) or event.get("type") != "m.room.message":
        return None
    content, sender, event_id = event.get("content"), event.get("sender"), event.get("event_id")
    if not isinstance(content, dict) or not _id(sender) or not _id(event_id):
        return None
    relation, body = content.get("m.relates_to", {}), content.get("body")
    if sender == room.me or not isinstance(relation, dict) or not isinstance(body, str):
        return None
    if relation.get("rel_type") == "m.replace":
        return None
    thread = _id(relation.get("event_id")) if relation.get("rel_type") == "m.thread" else None
    quoted = relation.get("m.in_reply_to")
    reply_to = _id(quoted.get("event_id")) if isinstance(quoted, dict) else None
    if thread and relation.get("is_falling_back") is True:
        reply_to = None  # the thread's latest event, for clients that do not show threads
    if quoted is not None and (fallback := _FALLBACK.match(body)):
        body = body[fallback.end() :]
    kind = content.get("msgtype")
    media = media_of(content) if kind in MEDIA_TYPES else None
    if media is not None:
        body = caption_of(content, body)
    elif not body.strip():
        return None
    mentioned = room.direct or _mentioned(content, body, reply_to, room)
    if len(body) > MAX_TEXT:
        body = body[:MAX_TEXT] + f"\n[the message goes on: cut at {MAX_TEXT} characters]"
    return InboundEvent(
        platform,
        event_id,
        ChatType.DM if room.direct else ChatType.GROUP,
        room_id,
        sender,
        body,
        thread_id=thread,
        is_bot=kind == "m.notice",
        message_id=event_id,
        reply_to=reply_to,
        mentioned=mentioned,
        attachments=() if media is None else (media.to_text(),),
    )


def _id(value: Any) -> str | None:
    """An id the event names, or None where it holds anything else."""
    return value if isinstance(value, str) and value else None


def _mentioned(content: dict[str, Any], body: str, reply_to: str | None, room: RoomView) -> bool:
    """Whether a group message is addressed to hermes (`body`: the new words, without a
    reply fallback, which names the quoted message's sender)."""
    if reply_to in room.my_events:
        return True
    if "m.mentions" in content:  # a client that has it says whom it mentions, only there
        mentions = content["m.mentions"]
        users = mentions.get("user_ids") if isinstance(mentions, dict) else None
        return isinstance(users, list) and room.me in users
    if room.me in body:
        return True
    if not room.my_name:
        return False
    return re.search(rf"(?<!\w){re.escape(room.my_name)}(?!\w)", body, re.I) is not None
