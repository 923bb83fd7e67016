"""A mail read into an inbound event, and an answer written as a mail.

Read: the sender is the From address (lower-cased), believed only as
`authentication.vouched` says unless the config relaxes it; the event's id is the
Message-ID (a hash of the headers where a mail has none); its thread is the first
Message-ID of its References (else In-Reply-To, else its own), so one thread is one
conversation; what the model reads is the reply's new words. An automatic mail (an
out-of-office reply, a bounce, a list's bulk mail) is never answered: two robots
answering each other is a mail loop. Nor is a mail written before the inbound journal's
retention (its Date header): the journal has forgotten it, so a copy seen again (a
mailbox synced again, a folder made again, a mail moved back) would be answered twice.
Attachments are named in the event by the mail's Message-ID and their place in it, to be
read again and saved once the sender is authorized.

Until a mail is believed, only its headers are parsed. A believed sender's mail is then
read whole, but a stranger's costs little before the gateway decides: its HTML is parsed
(content.py) and its thread's subject and Message-IDs are kept (the adapter's cursor) only
for a sender `let_in` names. The subject and every Message-ID are cut to MAX_HEADER bytes.

Written: a plain-text part (the Markdown as it is) and an HTML part rendered from it,
`Re:` the thread's subject,
In-Reply-To and References, and a Message-ID derived from the outbox row's idempotency
key, so a resend after an unknown outcome carries the same Message-ID, which mail
clients fold into one message. A file goes as an attachment of that mail (the caption
is its text), with its type and file name: multipart/mixed around the two parts.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, getaddresses, parseaddr, parsedate_to_datetime
from pathlib import Path

import attrs

from hermes.adapters.contract import ChatType, InboundEvent, OutFile
from hermes.adapters.email.authentication import vouched
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.content import body_text, new_words
from hermes.adapters.markdown_html import markdown_html
from hermes.adapters.media import MAX_ATTACHMENTS

_ID = re.compile(r"<[^<>\s]+>")
KEEP_REFERENCES = 20  # Message-IDs an answer names: the thread's first, and the latest
MAX_TEXT = 100_000  # characters of a mail the model reads
# Bytes (UTF-8) of a subject, a Message-ID or a sender's name kept: RFC 5322 lines are at
# most 998 characters, so no real Message-ID is cut, and a subject rarely is.
MAX_HEADER = 1024


@attrs.frozen
class Read:
    """A mail as hermes takes it: the event (None: not believed, `why` says), its subject,
    and the Message-IDs an answer to it names in its References (its thread's, then
    its own; the last 20). `let_in`: its sender is one `let_in` names (its thread is
    kept for the answer)."""

    event: InboundEvent | None
    subject: str
    why: str | None = None
    references: tuple[str, ...] = ()
    let_in: bool = False


def read_mail(
    raw: bytes,
    config: EmailConfig,
    platform: str,
    *,
    approved: frozenset[str] = frozenset(),
    not_before: float = -math.inf,
) -> Read:
    """`raw` as an event. `approved`: the senders pairing let in on this platform (for
    `let_in`); `not_before`: the oldest Date (Unix seconds) a mail admitted may carry."""
    head = parse(raw, headers_only=True)
    subject = capped(" ".join(str(head.get("Subject", "")).split()))
    sender = _sender(head)
    if sender is None:
        return Read(None, subject, "no From header with exactly one address")
    robot = _automatic(head, sender)
    if robot:
        return Read(None, subject, f"an automatic mail from {sender} ({robot})")
    if config.require_authentication:
        headers = [str(h) for h in head.get_all("Authentication-Results") or ()]
        domain = sender.rsplit("@", 1)[1]
        if not vouched(headers, config.trusted_authserv_id or "", domain):
            return Read(
                None,
                subject,
                f"{config.trusted_authserv_id} does not vouch for"
                f" {sender} (no DMARC or aligned DKIM pass)",
            )
    written = _written(head)
    if written is not None and written < not_before:
        return Read(
            None,
            subject,
            f"{sender}'s mail dated {_day(written)} is older than the"
            f" journal remembers (since {_day(not_before)}, retention."
            "journal_days): a copy seen again, not admitted",
        )
    own = _ids(str(head.get("Message-ID", "")))
    event_id = own[0] if own else _header_hash(head)
    references = _ids(str(head.get("References", ""))) or _ids(str(head.get("In-Reply-To", "")))
    thread = None if config.sessions == "sender" else (references[0] if references else event_id)
    ids = [*references, *own]
    chain = tuple(ids[:1] + ids[1:][-(KEEP_REFERENCES - 1) :])  # the root is always kept
    known = let_in(sender, config, approved)
    message = parse(raw)
    body = body_text(message, html=known)
    text = new_words(body.text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n[the mail goes on: cut at {MAX_TEXT} characters]"
    if body.unread:
        text = f"{text}\n{body.unread}".strip()
    found = attachments(message)
    files = tuple(
        json.dumps({"id": event_id, "part": n, "name": name}) for n, name in found[:MAX_ATTACHMENTS]
    )
    if len(found) > MAX_ATTACHMENTS:
        text += f"\n[{len(found) - MAX_ATTACHMENTS} more attachments, not saved]"
    event = InboundEvent(
        platform,
        event_id,
        ChatType.DM,
        sender,
        sender,
        text,
        thread_id=thread,
        user_name=capped(parseaddr(str(head.get("From", "")))[0]) or None,
        message_id=event_id,
        reply_to=references[-1] if references else None,
        mentioned=True,
        attachments=files,
        title=_title(subject) or None,
    )
    return Read(event, subject, references=chain, let_in=known)


def let_in(sender: str, config: EmailConfig, approved: frozenset[str]) -> bool:
    """Whether this platform's settings (`allowed_users`, `owner`, `allow_all_users`) or
    `approved` (its pairing approvals, and the senders `gateway.owners` and
    `gateway.allowed_users` name) let `sender` in: only then is the mail's HTML parsed
    and its thread kept. Not the decision, which is the gateway's."""
    return (
        config.allow_all_users
        or sender in config.allowed_users
        or sender == config.owner
        or sender in approved
    )


def capped(text: str, limit: int = MAX_HEADER) -> str:
    """`text` in at most `limit` bytes of UTF-8, cut at a character boundary."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    while limit > 0 and data[limit] & 0xC0 == 0x80:  # inside a character: before it
        limit -= 1
    return data[:limit].decode("utf-8", "surrogatepass")


def parse(raw: bytes, *, headers_only: bool = False) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(raw, headersonly=headers_only)
    assert isinstance(message, EmailMessage)
    return message


def attachments(message: EmailMessage) -> list[tuple[int, str]]:
    """The attachments of a mail: (its place among the mail's parts, its file name)."""
    found = []
    for n, part in enumerate(message.walk()):
        if part.is_multipart():
            continue
        name = part.get_filename()
        if part.get_content_disposition() == "attachment" or name:
            found.append((n, name or f"attachment-{n}"))
    return found


def attachment(message: EmailMessage, place: int) -> bytes:
    """The decoded content of the part at `place` (as `attachments` named it)."""
    for n, part in enumerate(message.walk()):
        if n == place and not part.is_multipart():
            data = part.get_payload(decode=True)
            if isinstance(data, bytes):
                return data
    raise ValueError(f"the mail has no attachment at part {place}")


def message_id(idempotency_key: str, domain: str, salt: str = "") -> str:
    """The Message-ID of the mail an outbox row sends: the same for every try of it,
    another for every install (`salt`)."""
    digest = hashlib.sha256(f"{salt}:{idempotency_key}".encode()).hexdigest()[:32]
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
    *,
    salt: str = "",
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
    mail["Message-ID"] = message_id(idempotency_key, domain, salt)
    # RFC 3834: a program's mail, so another program (an out-of-office) does not answer it
    mail["Auto-Submitted"] = "auto-replied" if reply_to else "auto-generated"
    if reply_to:
        mail["In-Reply-To"] = reply_to
        chain = [*references, reply_to] if reply_to not in references else list(references)
        mail["References"] = " ".join(chain)
    mail.set_content(text)
    mail.add_alternative(f"<html><body>{markdown_html(text)}</body></html>", subtype="html")
    return mail


def attach(mail: EmailMessage, file: OutFile) -> None:
    """Add `file` to `mail` as an attachment, base64, under its type (blocking: it reads
    the whole file, so on a worker thread; OSError when hermes's copy is gone). A
    message/* or multipart/* type goes as application/octet-stream: RFC 2046 allows
    those no base64, and their bytes must arrive as they are."""
    maintype, _, subtype = file.mime.partition("/")
    if not subtype or maintype in ("message", "multipart"):
        maintype, subtype = "application", "octet-stream"
    data = Path(file.path).read_bytes()
    mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=file.name)


def _sender(message: EmailMessage) -> str | None:
    """The one address of the one From header, lower-cased; None for anything else
    (none, several, or one a reader would take for another: "a@x.org <b@y.org>")."""
    froms = [value for name, value in message.raw_items() if name.lower() == "from"]
    if len(froms) != 1:
        return None
    raw = " ".join(str(froms[0]).split())  # as written, unfolded: not as the parser read it
    found = getaddresses([raw])
    if len(found) != 1 or "@" not in found[0][1]:
        return None
    address = found[0][1].strip().lower()
    if "<" in raw and f"<{address}>" not in raw.lower().replace(" ", ""):
        return None
    return address


def _automatic(message: EmailMessage, sender: str) -> str | None:
    """Why a mail was sent by a program, not a person (RFC 3834), or None."""
    auto = str(message.get("Auto-Submitted", "no")).strip().lower()
    if auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = str(message.get("Precedence", "")).strip().lower()
    if precedence in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {precedence}"
    if message.get("List-Id") is not None:
        return "a mailing list's"
    if sender.split("@")[0] in ("mailer-daemon", "postmaster"):
        return "a delivery report"
    return None


def _title(subject: str) -> str:
    """A thread's title: its subject without the Re:/Fwd: its replies add."""
    return re.sub(r"^(\s*(re|fwd?|aw|sv)\s*:\s*)+", "", subject, flags=re.IGNORECASE).strip()


def _ids(header: str) -> list[str]:
    """The Message-IDs in `header`, each cut to MAX_HEADER bytes (its brackets kept)."""
    return [f"<{capped(found[1:-1], MAX_HEADER - 2)}>" for found in _ID.findall(header)]


def _written(message: EmailMessage) -> float | None:
    """When the mail says it was written (its Date header, UTC unless it names a zone), in
    Unix seconds; None when it has no Date that reads as one."""
    try:
        written = parsedate_to_datetime(str(message.get("Date", "")))
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        return written.timestamp()
    except (ValueError, TypeError, OverflowError, IndexError):
        return None


def _day(when: float) -> str:
    try:
        return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (ValueError, OverflowError, OSError):
        return "long ago"


def _header_hash(message: EmailMessage) -> str:
    """An id for a mail without a Message-ID: its sender, date and subject, hashed."""
    seen = "\n".join(str(message.get(h, "")) for h in ("From", "Date", "Subject", "To"))
    return f"<{hashlib.sha256(seen.encode()).hexdigest()[:32]}@no-message-id>"
