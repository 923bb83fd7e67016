"""One mail out through SMTP submission, on a worker thread (smtplib is blocking), its
outcome read into a send result: 2xx sent; 4xx later, with backoff; 5xx a dead letter
with the server's words; a connection that never opened is not sent; one lost after
DATA may have been delivered (unknown: the same Message-ID if it is ever sent again).
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage

import trio

from hermes.adapters.contract import Permanent, RetryAfter, SendResult, Sent, Unconfirmed
from hermes.adapters.email.config import EmailConfig

TIMEOUT = 30.0  # seconds one SMTP read may take


async def submit(config: EmailConfig, password: str, mail: EmailMessage) -> SendResult:
    """Abandoned when the send's deadline passes (its thread ends at the socket's
    timeout): the outbox records the outcome as unknown, never as unsent."""
    return await trio.to_thread.run_sync(_submit, config, password, mail, abandon_on_cancel=True)


def _submit(config: EmailConfig, password: str, mail: EmailMessage) -> SendResult:
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
            if password and server.has_extn("auth"):
                server.login(config.username or config.address or "", password)
        except smtplib.SMTPAuthenticationError as exc:
            return RetryAfter(None, f"not sent: the login was refused: {_said(exc)}")
        except (OSError, smtplib.SMTPException) as exc:
            return RetryAfter(None, f"not sent: {exc}")
        try:
            refused = server.send_message(mail)
        except smtplib.SMTPRecipientsRefused as exc:
            return _refusal(next(iter(exc.recipients.values())))
        except smtplib.SMTPResponseException as exc:
            return _refusal((exc.smtp_code, exc.smtp_error))
        except (TimeoutError, smtplib.SMTPServerDisconnected, OSError) as exc:
            return Unconfirmed(f"no answer after the mail was handed over: {exc}")
    if refused:
        return _refusal(next(iter(refused.values())))
    return Sent(str(mail["Message-ID"]))


def _refusal(reply: tuple[int, bytes | str]) -> SendResult:
    code, said = reply
    text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    reason = f"{code} {' '.join(text.split())}"
    return RetryAfter(None, reason) if 400 <= code < 500 else Permanent(reason)


def _said(exc: smtplib.SMTPResponseException) -> str:
    return _refusal((exc.smtp_code, exc.smtp_error)).reason
