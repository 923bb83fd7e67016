"""Socket Mode envelopes as the gateway's InboundEvents.

`events_api` envelopes carry a DM (`message` with `channel_type: im`) or a
mention in a channel (`app_mention`); a thread reply has `thread_ts`; the
workspace (`team_id`) is the scope. A channel `message` that mentions the bot
is skipped (its `app_mention` is the one taken); bots' messages, the bot's own,
and messages with a subtype (edits, joins, deletions) are skipped. A
`slash_commands` envelope becomes the command's text (`/hermes new` is `/new`).
The event id is the payload's `event_id`, the same in every retry of it.

An `interactive` envelope of a `block_actions` payload (a button of ours pressed)
becomes the button's `value` (its command) from the user who pressed it, mentioned,
in the chat and thread of the message that carries it (`message_id`: that message's
ts). Its event id is `action-<action_ts>-<user>`, the same in every delivery of the
press. Other interactions, and a press without a value or a channel, are skipped.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS
from hermes.adapters.url_media import UrlRef

CHAT_TYPES = {
    "im": ChatType.DM,
    "channel": ChatType.CHANNEL,
    "group": ChatType.GROUP,
    "mpim": ChatType.GROUP,
}
APP_COMMAND = "/hermes"

log = logging.getLogger(__name__)


def _kind_of(channel: str) -> ChatType:
    return ChatType.DM if channel.startswith("D") else ChatType.CHANNEL


def _without_mention(text: str, bot_user: str) -> str:
    return re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", "", text).strip()


def _event(payload: dict[str, Any], bot_user: str, platform: str) -> InboundEvent | None:
    event = payload.get("event") or {}
    kind, user = event.get("type"), event.get("user")
    if kind not in ("message", "app_mention") or not user or user == bot_user:
        return None
    if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
        return None
    text, channel = str(event.get("text") or ""), str(event.get("channel") or "")
    mentioned = kind == "app_mention"
    if kind == "message":
        chat_type = CHAT_TYPES.get(event.get("channel_type") or "", _kind_of(channel))
        if chat_type is not ChatType.DM and f"<@{bot_user}" in text:
            return None  # its app_mention carries it
        mentioned = chat_type is ChatType.DM
    else:
        chat_type = _kind_of(channel)
    thread = event.get("thread_ts")
    return InboundEvent(
        platform=platform,
        event_id=str(payload["event_id"]),
        chat_type=chat_type,
        chat_id=channel,
        user_id=str(user),
        text=_without_mention(text, bot_user),
        scope_id=payload.get("team_id") or event.get("team"),
        thread_id=str(thread) if thread else None,
        message_id=str(event["ts"]) if event.get("ts") else None,
        mentioned=mentioned,
        attachments=_files(event.get("files")),
    )


def _files(found: Any) -> tuple[str, ...]:
    """References to the files a message shares (url_private_download, which takes the
    bot's token), fetched only once the event is authorized."""
    refs = []
    for item in (found if isinstance(found, list) else [])[:MAX_ATTACHMENTS]:
        if not isinstance(item, dict) or item.get("mode") == "external":
            continue
        url = item.get("url_private_download") or item.get("url_private")
        if isinstance(url, str):
            size = item.get("size")
            refs.append(
                UrlRef(
                    url,
                    str(item.get("name") or "attachment"),
                    size if isinstance(size, int) else None,
                    item.get("mimetype"),
                ).to_text()
            )
    return tuple(refs)


def _slash(payload: dict[str, Any], envelope_id: str, platform: str) -> InboundEvent:
    command, words = str(payload.get("command") or ""), str(payload.get("text") or "").strip()
    if command == APP_COMMAND:
        text = "/" + words if words else "/help"
    else:
        text = f"{command} {words}".strip()
    channel = str(payload.get("channel_id") or "")
    return InboundEvent(
        platform=platform,
        event_id="slash-" + str(payload.get("trigger_id") or envelope_id),
        chat_type=_kind_of(channel),
        chat_id=channel,
        user_id=str(payload.get("user_id") or ""),
        text=text,
        scope_id=payload.get("team_id"),
        mentioned=True,
    )


def _press(payload: dict[str, Any], platform: str) -> InboundEvent | None:
    actions = payload.get("actions") or [{}]
    action, user = actions[0], payload.get("user") or {}
    container, message = payload.get("container") or {}, payload.get("message") or {}
    channel = str((payload.get("channel") or {}).get("id") or container.get("channel_id") or "")
    command, action_ts, user_id = action.get("value"), action.get("action_ts"), user.get("id")
    if not command or not channel or not action_ts or not user_id:
        log.info(
            "%s: skipping a button press without a command, a channel, a time or a user (%s)",
            platform,
            payload.get("trigger_id"),
        )
        return None
    message_ts = container.get("message_ts") or message.get("ts")
    thread = message.get("thread_ts") or container.get("thread_ts")
    if thread and thread == message_ts:
        thread = None  # the message starts a thread: it is in the channel itself
    team = payload.get("team") or {}
    return InboundEvent(
        platform=platform,
        event_id=f"action-{action_ts}-{user_id}",
        chat_type=_kind_of(channel),
        chat_id=channel,
        user_id=str(user_id),
        text=str(command),
        scope_id=team.get("id") or user.get("team_id"),
        thread_id=str(thread) if thread else None,
        user_name=user.get("username") or user.get("name"),
        message_id=str(message_ts) if message_ts else None,
        mentioned=True,
    )


def incoming(
    envelope: dict[str, Any], bot_user: str, platform: str = "slack"
) -> InboundEvent | None:
    """None for an envelope the gateway does not take (acknowledged and skipped)."""
    payload = envelope.get("payload") or {}
    if envelope.get("type") == "events_api" and payload.get("event_id"):
        return _event(payload, bot_user, platform)
    if envelope.get("type") == "slash_commands":
        return _slash(payload, str(envelope.get("envelope_id") or ""), platform)
    if envelope.get("type") == "interactive":
        if payload.get("type") == "block_actions":
            return _press(payload, platform)
        log.debug("%s: skipping an interaction of type %s", platform, payload.get("type"))
    return None
