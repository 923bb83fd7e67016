"""Email for tests: a real Dovecot (IMAP, tests/fakes/dovecot.py) and a real SMTP server
that delivers into it (tests/fakes/smtp.py), started together; and the mails a test
puts in, built as a mail client would.

From a pytest fixture, after `require_system(DOVECOT, packages=("dovecot-imapd",))`:

    with mail_servers() as (imap, smtp):
        yield imap, smtp
"""

from __future__ import annotations

import contextlib
import email.policy
import email.utils
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from email.message import EmailMessage

from tests.fakes.dovecot import Dovecot
from tests.fakes.smtp import FakeSMTP

HERMES_ADDRESS = "hermes@example.org"
HERMES_PASSWORD = "hermes-secret"
ALICE_ADDRESS = "alice@example.org"
ALICE_PASSWORD = "alice-secret"


@contextlib.contextmanager
def mail_servers(
    users: Mapping[str, str] | None = None,
    *,
    smtp_login: tuple[str, str] | None = None,
    idle_notify: int | None = None,
) -> Iterator[tuple[Dovecot, FakeSMTP]]:
    """Dovecot serving `users` (address -> password; default hermes@ and alice@
    example.org) and an SMTP server delivering to them (AUTH required with
    `smtp_login`), both on 127.0.0.1, plain (no TLS)."""
    if users is None:
        users = {HERMES_ADDRESS: HERMES_PASSWORD, ALICE_ADDRESS: ALICE_PASSWORD}
    with (
        Dovecot(users, idle_notify=idle_notify) as imap,
        FakeSMTP(mailboxes=imap, login=smtp_login) as smtp,
    ):
        yield imap, smtp


def make_mail(
    frm: str,
    to: str | Sequence[str],
    subject: str,
    body: str,
    *,
    message_id: str | None = None,
    in_reply_to: str | None = None,
    references: Sequence[str] = (),
    auth_results: str | None = None,
    html: str | None = None,
    attachments: Sequence[tuple[str, str, bytes]] = (),
    date: datetime | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """A mail as a client sends it (CRLF line ends): a text part, an HTML alternative
    when `html`, each attachment (file name, MIME type "type/subtype", content);
    `auth_results` is the whole `Authentication-Results` value the receiving server
    would add, e.g. "mx.test; dkim=pass header.d=example.org; dmarc=pass
    header.from=example.org". `message_id` (with its angle brackets) defaults to a new
    one in the sender's domain; `headers` are added as they are (Auto-Submitted...)."""
    msg = EmailMessage()
    if auth_results is not None:
        msg["Authentication-Results"] = auth_results
    msg["From"] = frm
    msg["To"] = to if isinstance(to, str) else ", ".join(to)
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(date or datetime.now(UTC))
    domain = email.utils.parseaddr(frm)[1].rpartition("@")[2] or "example.org"
    msg["Message-ID"] = message_id or email.utils.make_msgid(domain=domain)
    if in_reply_to is not None:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = " ".join(references)
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content(body)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    for filename, mime_type, data in attachments:
        maintype, _, subtype = mime_type.partition("/")
        if not subtype:
            raise ValueError(f"an attachment's type is type/subtype, not {mime_type!r}")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return msg.as_bytes(policy=email.policy.SMTP)
