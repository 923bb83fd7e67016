"""One mail out through SMTP submission, on a worker thread (smtplib is blocking), its
outcome read into a send result: 2xx sent; 4xx later, with backoff; 5xx a dead letter
with the server's words; a connection lost before the mail was handed over is not sent;
one lost once DATA began may have been delivered (unknown: the same Message-ID if it is
ever sent again). The mail's size is declared at MAIL where the server has SIZE (RFC
1870), so a mail over its limit (a large attachment) is refused before it is sent.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import getaddresses

import trio

from hermes.adapters.contract import Permanent, RetryAfter, SendResult, Sent, Unconfirmed
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.refusals import Codes, Refusal, result_of

TIMEOUT = 30.0  # seconds one SMTP read may take


async def submit(config: EmailConfig, password: str, mail: EmailMessage) -> SendResult | Refusal:
    """Abandoned when the send's deadline passes (its thread ends at the socket's
    timeout): the outbox records the outcome as unknown, never as unsent. A refused
    login is a Refusal, for the adapter to judge (PlatformAdapter.refused)."""
    return await trio.to_thread.run_sync(_submit, config, password, mail, abandon_on_cancel=True)


def _submit(config: EmailConfig, password: str, mail: EmailMessage) -> SendResult | Refusal:
    data = mail.as_bytes(policy=mail.policy.clone(linesep="\r\n"))
    context = ssl.create_default_context()
    host, port = config.smtp_host or "", config.smtp_port
    try:
        if config.smtp_security == "tls":
            server: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=TIMEOUT, context=context)
        else:
            server = smtplib.SMTP(host, port, timeout=TIMEOUT)
    except (OSError, smtplib.SMTPException) as exc:
        return RetryAfter(None, f"not sent: cannot reach {host}:{port}: {exc}")
    with server:
        try:
            if config.smtp_security == "starttls":
                server.starttls(context=context)
            if password:  # login says EHLO first (after STARTTLS the server says it anew)
                server.login(config.username or config.address or "", password)
            sender = str(mail["From"])
            recipients = [a for _, a in getaddresses([str(mail["To"])]) if a]
            refused = _envelope(server, sender, recipients, len(data))
            if refused is not None:
                return refused
        except smtplib.SMTPAuthenticationError as exc:
            said = f"not sent: the login was refused: {_said(exc)}"
            return Refusal(0, str(exc.smtp_code), said)
        except smtplib.SMTPResponseException as exc:
            return _refused((exc.smtp_code, exc.smtp_error))
        except (OSError, smtplib.SMTPException) as exc:  # nothing was handed over
            return RetryAfter(None, f"not sent: {exc}")
        except UnicodeEncodeError as exc:
            return Permanent(f"an address this server cannot take (not ASCII): {exc}")
        try:
            code, said = server.data(data)
        except smtplib.SMTPResponseException as exc:
            return _refused((exc.smtp_code, exc.smtp_error))
        except (OSError, smtplib.SMTPException) as exc:
            return Unconfirmed(f"no answer after the mail was handed over: {exc}")
    if not 200 <= code < 300:
        return _refused((code, said))
    return Sent(str(mail["Message-ID"]))


def _envelope(
    server: smtplib.SMTP, sender: str, recipients: list[str], size: int
) -> SendResult | None:
    """MAIL (with the mail's SIZE where the server takes it) and RCPT: None when every
    recipient was taken, else what the server said."""
    server.ehlo_or_helo_if_needed()
    code, said = server.mail(sender, [f"SIZE={size}"] if server.has_extn("size") else [])
    if code != 250:
        return _refused((code, said))
    for recipient in recipients:
        code, said = server.rcpt(recipient)
        if code not in (250, 251):
            return _refused((code, said))
    return None if recipients else Permanent("the mail names no recipient")


CODES = Codes(
    passing=frozenset(str(code) for code in range(400, 500)),
    auth=frozenset({"534", "535"}),  # a login refused: the password is wrong or not allowed
)


def _refused(reply: tuple[int, bytes | str]) -> SendResult:
    """An SMTP reply that refused the mail: 4xx is passing (try later), 5xx never."""
    code, said = reply
    text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    return result_of(Refusal(0, str(code), f"{code} {' '.join(text.split())}"), CODES)


def _said(exc: smtplib.SMTPResponseException) -> str:
    return _refused((exc.smtp_code, exc.smtp_error)).reason
