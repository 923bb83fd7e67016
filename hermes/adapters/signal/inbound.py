"""A signal-cli `receive` (its `envelope`) as the gateway's InboundEvent.

Only data messages with words or attachments are taken: reactions, receipts, typing
indicators, edits (`editMessage`: the original was answered), remote deletes, stories,
group updates and sync messages (what the account's own other devices did) are not,
and neither is anything the account sent. A group's id is its chat; in a group hermes
is mentioned by a mention of its account or a quote of one of its messages. Signal
marks a mention with U+FFFC in the text; it is written back as `@hermes` or `@someone`
(never a number).

A message is known by its sender and its timestamp (Signal's own way: a quote names
them), so the event id is both, and a message id is `timestamp:author`, which is what a
quote of it needs.

An envelope is anyone's bytes: what is not the documented shape is skipped.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS

MAX_TEXT = 20_000  # characters of a message the model reads
MENTION = "\ufffc"


@attrs.frozen
class Taken:
    event: InboundEvent


def message_id(timestamp: int, author: str) -> str:
    return f"{timestamp}:{author}"


def read_envelope(params: Any, account: str, platform: str) -> Taken | None:
    """None for an envelope hermes does not take."""
    if not isinstance(params, dict) or not isinstance(params.get("envelope"), dict):
        return None
    envelope = params["envelope"]
    data = envelope.get("dataMessage")
    sender = _text(envelope.get("sourceNumber")) or _text(envelope.get("sourceUuid"))
    timestamp = envelope.get("timestamp")
    if not isinstance(data, dict) or sender is None or not _whole(timestamp):
        return None  # a receipt, typing, an edit, a sync message, a story...
    if sender == account or envelope.get("sourceUuid") == account:
        return None
    if any(k in data for k in ("reaction", "remoteDelete", "groupV2Change")):
        return None
    group = data.get("groupInfo")
    if group is not None and (
        not isinstance(group, dict)
        or group.get("type", "DELIVER") != "DELIVER"
        or not _text(group.get("groupId"))
    ):
        return None
    text = data.get("message") if isinstance(data.get("message"), str) else ""
    found = data.get("mentions")
    mentions = [
        m
        for m in (found if isinstance(found, list) else [])
        if isinstance(m, dict) and _whole_or_zero(m.get("start")) and _whole(m.get("length", 1))
    ]
    text = _mentions_written(text, mentions, account)
    attachments = _attachments(data.get("attachments"), group, sender)
    if not text.strip() and not attachments:
        return None
    quote = data.get("quote") if isinstance(data.get("quote"), dict) else {}
    quoted_author = _text(quote.get("authorNumber")) or _text(quote.get("author"))
    reply_to = (
        message_id(quote["id"], quoted_author)
        if _whole(quote.get("id")) and quoted_author
        else None
    )
    mentioned = (
        group is None
        or quoted_author == account
        or any(account in (m.get("number"), m.get("uuid")) for m in mentions)
    )
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n[the message goes on: cut at {MAX_TEXT} characters]"
    chat = group["groupId"] if group is not None else sender
    event = InboundEvent(
        platform,
        f"{sender}:{timestamp}",
        ChatType.GROUP if group else ChatType.DM,
        chat,
        sender,
        text,
        user_name=_text(envelope.get("sourceName")),
        message_id=message_id(timestamp, sender),
        reply_to=reply_to,
        mentioned=mentioned,
        attachments=attachments,
    )
    return Taken(event)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _mentions_written(text: str, mentions: list[dict[str, Any]], account: str) -> str:
    """Each U+FFFC Signal put for a mention as `@hermes` (its own) or `@someone`: signal-cli
    names a mention by its number or account id, which the model is not given. `start`
    counts UTF-16 code units; mentions are replaced from the last."""
    units = text.encode("utf-16-le")
    for mention in sorted(mentions, key=lambda m: m["start"], reverse=True):
        start, length = mention["start"], mention.get("length", 1)
        mine = account in (mention.get("number"), mention.get("uuid"))
        name = "@hermes" if mine else "@someone"
        units = units[: 2 * start] + name.encode("utf-16-le") + units[2 * (start + length) :]
    return units.decode("utf-16-le", "replace")


def _whole_or_zero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _attachments(found: Any, group: Any, sender: str) -> tuple[str, ...]:
    """The adapter's references to a message's attachments, read only once the event is
    authorized: the daemon's id, where the message came from (getAttachment needs it),
    the name and the size."""
    refs = []
    for item in (found if isinstance(found, list) else [])[:MAX_ATTACHMENTS]:
        if not isinstance(item, dict) or not _text(item.get("id")):
            continue
        where = {"groupId": group["groupId"]} if isinstance(group, dict) else {"recipient": sender}
        size = item.get("size") if _whole(item.get("size")) else None
        name = _text(item.get("filename")) or item["id"]
        mime = _text(item.get("contentType"))
        refs.append(
            json.dumps({"id": item["id"], **where, "name": name, "size": size, "contentType": mime})
        )
    return tuple(refs)
