"""A proven Twilio webhook, read: an incoming message as an InboundEvent, a status
callback of a send that failed as a DeliveryFailed, and what hermes leaves alone.

The form is outside input: a field missing or malformed skips the message (logged by
the adapter), never a crash. A message Twilio marks as an opt-out, opt-in or help keyword
(`OptOutType`), or without that mark STOP, START, HELP and their synonyms, is Twilio's
to answer (it keeps the opt-out list and replies itself): never a turn.
MMS media is kept as references (`type|url`), fetched only once the sender is
authorized.
"""

from __future__ import annotations

import attrs

from hermes.adapters.contract import ChatType, DeliveryFailed, InboundEvent
from hermes.adapters.media import MAX_ATTACHMENTS
from hermes.adapters.sms.config import E164

# Twilio's opt-out, opt-in and help keywords hermes leaves to it where Twilio does not
# say (no OptOutType: matched on the whole body). Not YES, CANCEL, END, QUIT, INFO, though
# Twilio's defaults: they answer the agent's questions ("Yes"), so they are turns.
KEYWORDS = frozenset(
    {"STOP", "STOPALL", "UNSUBSCRIBE", "OPTOUT", "REVOKE"} | {"START", "UNSTOP", "OPTIN"} | {"HELP"}
)
FAILED = frozenset({"failed", "undelivered"})
MAX_TEXT = 16 * 1024  # characters of a body read (Twilio's own limit is 1,600)
# What Twilio's delivery errors mean (https://www.twilio.com/docs/api/errors).
MEANINGS = {
    "30001": "queue overflow",
    "30002": "account suspended",
    "30003": "unreachable destination handset",
    "30004": "message blocked",
    "30005": "unknown destination handset",
    "30006": "landline or unreachable carrier",
    "30007": "filtered as spam by the carrier",
    "30008": "unknown error",
    "30034": "sent from an unregistered 10DLC number",
    "21610": "the recipient opted out (STOP)",
}


@attrs.frozen
class Ignored:
    """A message hermes does not answer, and why (a log line)."""

    why: str


def message_of(form: dict[str, str], platform: str) -> InboundEvent | Ignored:
    """An incoming message's event: from a number in E.164, its text and media."""
    sid, sender = form.get("MessageSid") or form.get("SmsMessageSid"), form.get("From", "")
    if not sid:
        return Ignored("no MessageSid")
    if not E164.fullmatch(sender):
        return Ignored(f"{sid} is from {sender[:40]!r}, not a number in E.164")
    text = form.get("Body", "")[:MAX_TEXT]
    if "OptOutType" in form:  # Twilio read the keywords itself: its word decides
        keyword = bool(form["OptOutType"])
    else:
        keyword = text.strip().upper() in KEYWORDS
    if keyword:
        return Ignored(f"{sid} is an opt-out, opt-in or help keyword, which Twilio answers")
    media = []
    try:
        count = min(int(form.get("NumMedia") or 0), MAX_ATTACHMENTS)
    except ValueError:
        count = 0
    for n in range(count):
        url, mime = form.get(f"MediaUrl{n}", ""), form.get(f"MediaContentType{n}", "")
        if url.startswith(("https://", "http://")):
            media.append(f"{mime.replace('|', '_')}|{url}")
    if not text.strip() and not media:
        return Ignored(f"{sid} is empty")
    return InboundEvent(
        platform,
        sid,
        ChatType.DM,
        sender,
        sender,
        text,
        message_id=sid,
        mentioned=True,
        attachments=tuple(media),
    )


def failure_of(form: dict[str, str], platform: str) -> DeliveryFailed | None:
    """A status callback that says the send failed (`failed`, `undelivered`), with
    Twilio's error code and its meaning; None for any other status."""
    sid, status = form.get("MessageSid") or form.get("SmsSid"), form.get("MessageStatus")
    if not sid or status not in FAILED:
        return None
    code = form.get("ErrorCode") or "?"
    meaning = MEANINGS.get(code, "see twilio.com/docs/api/errors/" + code)
    return DeliveryFailed(platform, sid, f"Twilio says {status} ({code}): {meaning}")
