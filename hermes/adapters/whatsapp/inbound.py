"""A webhook delivery from Meta, read: proven by its signature, then each message as an
inbound event (with the time the user wrote, which opens the 24-hour window) and each
`failed` status as a delivery that failed after the send was taken.

A payload is outside input: what is not the documented shape is skipped, never a
crash; a message of a kind hermes does not read says so in one line.

A message older than the inbound journal remembers (`forgotten`) is refused by its own
timestamp: Meta retries a delivery for days and an operator may replay old ones, and the
journal, which recognises a delivery again, forgets an event after retention's
`journal_days`; admitted again, it would be answered twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import attrs

from hermes.adapters.contract import ChatType, DeliveryFailed, InboundEvent

SIGNATURE_HEADER = "x-hub-signature-256"
MEDIA_KINDS = ("image", "audio", "video", "document", "sticker")
DAY = 86400.0
CLOCK_SKEW = 300.0  # seconds Meta's clock may run ahead of ours, covered by `forgotten`


@attrs.frozen
class Message:
    """One message of a delivery: the event and when its user wrote it (Unix seconds;
    0.0 when the message does not say, or says something that is no time)."""

    event: InboundEvent
    written_at: float


def forgotten(written_at: float, now: float, journal_days: float) -> bool:
    """Whether a message written at `written_at` is older than the inbound journal
    remembers (it forgets events received `journal_days` ago), so that a delivery of it
    again would be taken for new. A little early (CLOCK_SKEW, at most half the window), so
    that Meta's clock running ahead of ours cannot slip one through; a message that does
    not say when it was written (0.0) never is."""
    window = journal_days * DAY
    return 0.0 < written_at < now - window + min(CLOCK_SKEW, window / 2)


def media_ref(kind: str, media_id: str, mime: str, name: str) -> str:
    """An attachment as the adapter names it to itself (fetched only once authorized)."""
    return "|".join((kind, media_id, mime, name.replace("|", "_")))


def read_media_ref(ref: str) -> tuple[str, str, str, str]:
    kind, media_id, mime, name = (ref.split("|", 3) + ["", "", "", ""])[:4]
    return kind, media_id, mime, name


def messages(payload: Any, platform: str, phone_number_id: str) -> Iterator[Message]:
    """Every message to our number in the delivery, in order."""
    for value in _values(payload, phone_number_id):
        names = {
            str(c.get("wa_id")): _name(c.get("profile"))
            for c in _list(value.get("contacts"))
            if isinstance(c, dict)
        }
        for raw in _list(value.get("messages")):
            if isinstance(raw, dict) and (found := _message(raw, platform, names)) is not None:
                yield found


def failures(payload: Any, platform: str, phone_number_id: str) -> Iterator[DeliveryFailed]:
    """Every `failed` status in the delivery (sent, delivered and read change nothing)."""
    for value in _values(payload, phone_number_id):
        for status in _list(value.get("statuses")):
            if not isinstance(status, dict) or status.get("status") != "failed":
                continue
            errors = [e for e in _list(status.get("errors")) if isinstance(e, dict)]
            first = errors[0] if errors else {}
            data = first.get("error_data")
            details = (data.get("details") if isinstance(data, dict) else None) or first.get(
                "message"
            )
            reason = f"{first.get('title') or 'failed'} ({first.get('code', '?')})"
            yield DeliveryFailed(
                platform, str(status.get("id")), f"{reason}: {details}" if details else reason
            )


def _values(payload: Any, phone_number_id: str) -> Iterator[dict[str, Any]]:
    """Each `messages` change for our number (a business account's other numbers share
    the webhook)."""
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        return
    for entry in _list(payload.get("entry")):
        for change in _list(entry.get("changes")) if isinstance(entry, dict) else ():
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                continue
            metadata = value.get("metadata")
            ours = str(metadata.get("phone_number_id") or "") if isinstance(metadata, dict) else ""
            if ours == phone_number_id:
                yield value


def _message(raw: dict[str, Any], platform: str, names: dict[str, Any]) -> Message | None:
    kind, wamid, user = raw.get("type"), raw.get("id"), raw.get("from")
    if not isinstance(wamid, str) or not isinstance(user, str) or kind == "reaction":
        return None  # reactions are not messages to answer
    text, attachments = _content(kind, raw)
    context = raw.get("context")
    event = InboundEvent(
        platform,
        wamid,
        ChatType.DM,
        user,
        user,
        text,
        user_name=names.get(user),
        message_id=wamid,
        reply_to=context.get("id") if isinstance(context, dict) else None,
        mentioned=True,
        attachments=attachments,
    )
    try:
        written_at = float(raw.get("timestamp") or 0)
    except (TypeError, ValueError):
        written_at = 0.0
    if not math.isfinite(written_at) or written_at < 0:  # "inf", "nan", "-5": no time
        written_at = 0.0
    return Message(event, written_at)


def _content(kind: Any, raw: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The text a message carries, and its media as attachment references."""
    body = raw.get(kind) if isinstance(kind, str) else None
    body = body if isinstance(body, dict) else {}
    if kind == "text":
        return str(body.get("body") or ""), ()
    if kind == "interactive":  # a press of a reply button or a list row: its title
        reply = body.get("button_reply") or body.get("list_reply") or {}
        return str(reply.get("title") or reply.get("id") or ""), ()
    if kind == "button":  # a template's quick-reply button
        return str(body.get("text") or body.get("payload") or ""), ()
    if kind in MEDIA_KINDS and body.get("id"):
        voice = kind == "audio" and body.get("voice")
        name = str(body.get("filename") or f"{'voice' if voice else kind}-{body['id']}")
        ref = media_ref(
            "voice" if voice else kind, str(body["id"]), str(body.get("mime_type") or ""), name
        )
        return str(body.get("caption") or ""), (ref,)
    if kind == "location":
        return f"[a location: {body.get('latitude')}, {body.get('longitude')}]", ()
    return f"[a {kind} message, which hermes does not read]", ()


def _list(value: Any) -> list[Any]:
    """A payload's list, or none where it holds something else."""
    return value if isinstance(value, list) else []


def _name(profile: Any) -> str | None:
    name = profile.get("name") if isinstance(profile, dict) else None
    return name if isinstance(name, str) else None
