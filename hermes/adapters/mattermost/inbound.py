"""Mattermost's posts and button presses as the gateway's InboundEvents.

A post comes by the WebSocket (a `posted` event: the post as a JSON string, the
channel's type, the ids it mentions) or by the catch-up after a reconnect (the post
alone, the channel's type from the channel list): both make the same event, keyed by
the post's id, so the journal admits it once whichever brings it first. Skipped: the
bot's own posts, other bots' and webhooks' (`props.from_bot`, `from_webhook`), system
posts (a `type`), and a post deleted since. A DM is always for the bot; elsewhere it is
mentioned by `@username` (or the socket's `mentions`), which is taken out of the text.
A reply in a thread (`root_id`) is in that thread's session.

A press of a button of ours comes from the Mattermost server to the listener with the
`context` we gave the button: the command, where it was shown, and a token, the
HMAC-SHA256 of those under a key derived from the bot's token. Mattermost never shows
an action's context to clients, so a press whose token does not match was not made by
Mattermost from our message: refused before it costs anything. The token does not
cover who pressed (the post's id is not known when its buttons are made): a press is
keyed by its post, its user and its command, so a captured press sent again is the same
event, admitted once; the listener's path should be open to the Mattermost server only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS
from hermes.adapters.url_media import UrlRef

CHAT_TYPES = {"D": ChatType.DM, "G": ChatType.GROUP, "O": ChatType.CHANNEL, "P": ChatType.CHANNEL}
MAX_COMMAND = 2000  # characters of a button's command carried in its context
MAX_ID = 64  # characters of a press's post or user id (Mattermost's are 26)


def post_event(
    post: dict[str, Any],
    channel_type: str,
    bot: dict[str, str],
    base: str,
    platform: str,
    mentions: tuple[str, ...] = (),
    team: str | None = None,
) -> InboundEvent | None:
    """The event of a user's post (None: one the gateway does not take). `bot`: the
    bot's `id` and `username`; `base`: the server, where its files are."""
    props = post.get("props") if isinstance(post.get("props"), dict) else {}
    user = str(post.get("user_id") or "")
    if not user or user == bot["id"] or post.get("type") or post.get("delete_at"):
        return None
    if str(props.get("from_bot")) == "true" or str(props.get("from_webhook")) == "true":
        return None
    chat_type = CHAT_TYPES.get(channel_type, ChatType.CHANNEL)
    text = str(post.get("message") or "")
    named = re.compile(rf"(?<![\w.-])@{re.escape(bot['username'])}(?![\w.-])", re.IGNORECASE)
    mentioned = chat_type is ChatType.DM or bot["id"] in mentions or bool(named.search(text))
    root = str(post.get("root_id") or "")
    return InboundEvent(
        platform=platform,
        event_id=str(post["id"]),
        chat_type=chat_type,
        chat_id=str(post["channel_id"]),
        user_id=user,
        text=named.sub("", text).strip(),
        scope_id=team or None,
        thread_id=root or None,
        user_name=str(props.get("override_username") or "") or None,
        message_id=str(post["id"]),
        mentioned=mentioned,
        attachments=_files(post, base),
    )


def _files(post: dict[str, Any], base: str) -> tuple[str, ...]:
    """References to the post's files (`metadata.files`), fetched with the bot's token
    from the server only once the event is authorized."""
    found = (post.get("metadata") or {}).get("files") or []
    refs = []
    for info in found[:MAX_ATTACHMENTS] if isinstance(found, list) else []:
        if isinstance(info, dict) and isinstance(info.get("id"), str):
            size = info.get("size")
            url = base.rstrip("/") + "/api/v4/files/" + info["id"]
            name = str(info.get("name") or "attachment")
            ref = UrlRef(url, name, size if isinstance(size, int) else None, info.get("mime_type"))
            refs.append(ref.to_text())
    return tuple(refs)


def socket_post(data: dict[str, Any]) -> tuple[dict[str, Any], str, tuple[str, ...], str]:
    """A `posted` event's post, channel type, mentioned ids and team."""
    post = json.loads(data["post"])
    mentions = json.loads(data.get("mentions") or "[]")
    ids = tuple(str(m) for m in mentions) if isinstance(mentions, list) else ()
    return post, str(data.get("channel_type") or ""), ids, str(data.get("team_id") or "")


def action_key(token: str) -> bytes:
    """The key button tokens are made with, derived from the bot's token (never the token)."""
    return hashlib.sha256(b"hermes mattermost actions\0" + token.encode()).digest()


def action_token(key: bytes, command: str, channel: str, root: str, kind: str) -> str:
    """The token of a button of `command` shown in `channel` (`root`: its thread), a
    chat of `kind` (a ChatType's value)."""
    message = json.dumps([command, channel, root, kind]).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def press_event(payload: Any, key: bytes, platform: str) -> InboundEvent | None:
    """The event of a press whose context carries our token for its command and channel;
    None for anything else (a forged or malformed press)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("context"), dict):
        return None
    context = payload["context"]
    command, root = context.get("command"), context.get("root") or ""
    channel, user = payload.get("channel_id"), payload.get("user_id")
    given, kind = context.get("token"), context.get("kind")
    if not all(isinstance(v, str) and v for v in (command, channel, user, given)):
        return None
    if not isinstance(root, str) or len(command) > MAX_COMMAND or kind not in set(ChatType):
        return None
    expected = action_token(key, command, channel, root, kind)
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
        return None
    post = payload.get("post_id")
    if not isinstance(post, str) or not post or len(post) > MAX_ID:
        return None
    # not `trigger_id`: the sender chooses it. A press replayed (as any user: the token
    # does not cover the user) is the same event as the first, admitted once
    digest = hashlib.sha256(command.encode()).hexdigest()[:32]
    return InboundEvent(
        platform=platform,
        event_id=f"action-{post}-{user[:MAX_ID]}-{digest}",
        chat_type=ChatType(kind),
        chat_id=channel,
        user_id=user,
        text=command,
        scope_id=str(payload.get("team_id") or "") or None,
        thread_id=root or None,
        user_name=str(payload.get("user_name") or "") or None,
        message_id=post,
        mentioned=True,
    )
