"""A mail read into an inbound event, and an answer written as a mail.

Read: the sender is the From address (lower-cased), believed only as
`authentication.vouched` says unless the config relaxes it; the event's id is the
Message-ID (a hash of the headers where a mail has none); its thread is the first
Message-ID of its References (else In-Reply-To, else its own), so one thread is one
conversation; what the model reads is the reply's new words.

Written: a plain-text part and a minimal HTML part, `Re:` the thread's subject,
In-Reply-To and References, and a Message-ID derived from the outbox row's idempotency
key, so a resend after an unknown outcome carries the same Message-ID, which mail
clients fold into one message.
"""

from __future__ import annotations

import hashlib
import html
import re
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, parseaddr

import attrs

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.email.authentication import vouched
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.content import body_text, new_words

_ID = re.compile(r"<[^<>\s]+>")


@attrs.frozen
class Read:
    """A mail as hermes takes it: the event (None: not believed, `why` says), its subject,
    and the Message-IDs an answer to it names in its References (its thread's, then
    its own; the last 20)."""

    event: InboundEvent | None
    subject: str
    why: str | None = None
    references: tuple[str, ...] = ()


def read_mail(raw: bytes, config: EmailConfig, platform: str) -> Read:
    message = BytesParser(policy=policy.default).parsebytes(raw)
    sender = parseaddr(str(message.get("From", "")))[1].strip().lower()
    subject = " ".join(str(message.get("Subject", "")).split())
    if "@" not in sender:
        return Read(None, subject, "no From address")
    if config.require_authentication:
        headers = [str(h) for h in message.get_all("Authentication-Results") or ()]
        domain = sender.rsplit("@", 1)[1]
        if not vouched(headers, config.trusted_authserv_id or "", domain):
            return Read(None, subject, f"{config.trusted_authserv_id} does not vouch for"
                                       f" {sender} (no DMARC or aligned DKIM pass)")  # fmt: skip
    own = _ids(str(message.get("Message-ID", "")))
    event_id = own[0] if own else _header_hash(message)
    references = _ids(str(message.get("References", ""))) or _ids(
        str(message.get("In-Reply-To", ""))
    )
    thread = None if config.sessions == "sender" else (references[0] if references else event_id)
    chain = tuple([*references, *own][-20:])
    text = new_words(body_text(message))
    event = InboundEvent(
        platform, event_id, ChatType.DM, sender, sender, text, thread_id=thread,
        user_name=parseaddr(str(message.get("From", "")))[0] or None, message_id=event_id,
        reply_to=references[-1] if references else None, mentioned=True,
    )  # fmt: skip
    return Read(event, subject, references=chain)


def message_id(idempotency_key: str, domain: str) -> str:
    """The Message-ID of the mail an outbox row sends: the same for every try of it."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return f"<{digest}.hermes@{domain}>"


def answer_mail(
    config: EmailConfig,
    to: str,
    text: str,
    idempotency_key: str,
    now: float,
    subject: str = "",
    reply_to: str | None = None,
    references: tuple[str, ...] = (),
) -> EmailMessage:
    """The mail that sends `text` to `to`; a reply (to `reply_to`, in a thread whose
    Message-IDs are `references`) carries them and `Re:` the subject."""
    address = config.address or ""
    domain = config.message_id_domain or address.rsplit("@", 1)[-1] or "hermes.invalid"
    mail = EmailMessage()
    mail["From"] = address
    mail["To"] = to
    title = subject or "A message from hermes"
    mail["Subject"] = title if title.lower().startswith("re:") or not reply_to else f"Re: {title}"
    mail["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    mail["Message-ID"] = message_id(idempotency_key, domain)
    if reply_to:
        mail["In-Reply-To"] = reply_to
        chain = [*references, reply_to] if reply_to not in references else list(references)
        mail["References"] = " ".join(chain)
    mail.set_content(text)
    paragraphs = "".join(f"<p>{html.escape(p).replace(chr(10), '<br>')}</p>"
                         for p in text.split("\n\n") if p.strip())  # fmt: skip
    mail.add_alternative(f"<html><body>{paragraphs}</body></html>", subtype="html")
    return mail


def _ids(header: str) -> list[str]:
    return _ID.findall(header)


def _header_hash(message: EmailMessage) -> str:
    """An id for a mail without a Message-ID: its sender, date and subject, hashed."""
    seen = "\n".join(str(message.get(h, "")) for h in ("From", "Date", "Subject", "To"))
    return f"<{hashlib.sha256(seen.encode()).hexdigest()[:32]}@no-message-id>"
