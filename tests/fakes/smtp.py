"""A real SMTP server for tests (aiosmtpd, its asyncio loop on a thread of the test
process) on 127.0.0.1: it records every message it accepts and delivers it into the
Dovecot maildir of each recipient that is a Dovecot user, so a reply can be read back
over IMAP; faults on demand: a 4xx or 5xx at MAIL, RCPT (per recipient) or DATA, or the
connection dropped once the message is in, before the server's reply; a lower size
limit (RFC 1870's SIZE) on demand. A received mail's attachments are read with
`ReceivedMail.attachments`.

Plain SMTP, no STARTTLS; AUTH PLAIN/LOGIN when the server is given a login, then
required before MAIL.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any, Literal, Self

import attrs
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fakes.dovecot import HOST, Dovecot, parsed
from tests.fakes.kit import Faults, wait

Stage = Literal["MAIL", "RCPT", "DATA"]
STAGES: tuple[Stage, ...] = ("MAIL", "RCPT", "DATA")
DROP = "drop"  # the fault that closes the connection after DATA, before the reply
DEFAULT_SIZE_LIMIT = 33_554_432  # aiosmtpd's own, announced in EHLO's SIZE


@attrs.frozen
class Refusal:
    """A reply a fault gave instead of the server's 250."""

    stage: Stage
    code: int
    text: str
    mail_from: str | None
    recipient: str | None  # at RCPT: the refused address


@attrs.frozen
class Attachment:
    """An attachment of a received mail, as a mail client saves it: decoded."""

    filename: str | None
    content_type: str  # "type/subtype", without parameters
    data: bytes


@attrs.frozen
class ReceivedMail:
    """A message the server took in (after DATA)."""

    mail_from: str
    rcpt_tos: tuple[str, ...]  # the recipients it accepted
    raw: bytes  # as sent, dot-unstuffed
    login: str | None  # the AUTH user of the session, if any
    delivered_to: tuple[str, ...]  # the Dovecot users it was put in the INBOX of
    dropped: bool  # the connection was dropped before the reply (the client can't know)

    @property
    def message(self) -> EmailMessage:
        return parsed(self.raw)

    @property
    def text(self) -> str:
        """Its plain-text part as a reader sees it (without the trailing newline)."""
        part = self.message.get_body(("plain",))
        return "" if part is None else str(part.get_content()).strip()

    @property
    def attachments(self) -> list[Attachment]:
        """Its attachments (the parts beside its body), in order, their bytes decoded."""
        found = []
        for part in self.message.iter_attachments():
            data = part.get_payload(decode=True)
            found.append(Attachment(part.get_filename(), part.get_content_type(),
                                    data if isinstance(data, bytes) else b""))  # fmt: skip
        return found


@attrs.frozen
class _Reply:
    code: int
    text: str


class _Controller(Controller):
    """aiosmtpd's Controller on a port the kernel picks (0): it learns the port before
    it connects to itself to check the server is up. Each connection's server takes the
    fake's size limit as it is then."""

    def __init__(self, fake: FakeSMTP, **kwargs: Any) -> None:
        super().__init__(_Handler(fake), **kwargs)
        self.fake = fake

    def factory(self) -> SMTP:
        return SMTP(self.handler, **{**self.SMTP_kwargs, "data_size_limit": self.fake.size_limit})

    def _trigger_server(self) -> None:
        assert self.server is not None
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


class FakeSMTP:
    """An SMTP server on `host`:`port` (plain, no TLS). With `login` (user, password)
    AUTH PLAIN or LOGIN is required before MAIL; without, none is asked. With
    `mailboxes`, a message is delivered into the INBOX of each accepted recipient that
    is one of its users. A context manager: serving between enter and exit."""

    host = HOST

    def __init__(
        self, *, mailboxes: Dovecot | None = None, login: tuple[str, str] | None = None
    ) -> None:
        self.mailboxes = mailboxes
        self.login = login
        self.size_limit = DEFAULT_SIZE_LIMIT  # octets a connection takes (`limit_size`)
        self._cond = threading.Condition()
        self._faults: Faults[_Reply | str] = Faults()
        self._received: list[ReceivedMail] = []
        self._refused: list[Refusal] = []
        self._internal_errors: list[str] = []
        self._controller: _Controller | None = None

    @property
    def port(self) -> int:
        """The port it listens on (0 before it is entered)."""
        return 0 if self._controller is None else self._controller.port

    def __enter__(self) -> Self:
        self._controller = _Controller(
            self,
            hostname=HOST,
            port=0,
            server_hostname="smtp.hermes.test",
            authenticator=self._authenticate if self.login else None,
            auth_require_tls=False,  # plain SMTP on loopback: tests only
        )
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._controller is not None:
            self._controller.stop()

    # -- what it saw --------------------------------------------------------------------

    @property
    def received(self) -> list[ReceivedMail]:
        """The messages taken in, in order."""
        with self._cond:
            return list(self._received)

    @property
    def refused(self) -> list[Refusal]:
        """The replies faults gave, in order."""
        with self._cond:
            return list(self._refused)

    @property
    def internal_errors(self) -> list[str]:
        """Tracebacks of the fake's own failures; a test may assert none."""
        with self._cond:
            return list(self._internal_errors)

    def wait_received(self, count: int = 1, timeout: float = 10.0) -> list[ReceivedMail]:
        """The messages taken in, once at least `count` were."""
        self.wait_until(lambda fake: len(fake._received) >= count, timeout,
                        f"{count} message(s) received")  # fmt: skip
        return self.received

    def wait_until(
        self, ready: Callable[[FakeSMTP], bool], timeout: float = 10.0, what: str = "it"
    ) -> None:
        """Until `ready(fake)` (checked on every change of what the fake saw)."""
        wait(self._cond, lambda: ready(self), timeout,
             lambda: f"the fake SMTP server saw no {what} within {timeout:g} s")  # fmt: skip

    # -- faults -------------------------------------------------------------------------

    def fail(
        self,
        code: int,
        text: str,
        *,
        at: Stage = "DATA",
        recipient: str | None = None,
        times: int | None = 1,
    ) -> None:
        """Answer `code` `text` (e.g. 451 "4.3.0 try later", 550 "5.1.1 no such user")
        instead of 250 at the next `times` (None: every) MAIL, RCPT or DATA; at RCPT,
        only for `recipient` when given. At DATA the message is not taken in."""
        if not 400 <= code <= 599:
            raise ValueError(f"an SMTP failure is a 4xx or 5xx, not {code}")
        if at not in STAGES:
            raise ValueError(f"no SMTP stage {at!r} (one of {', '.join(STAGES)})")
        if recipient is not None and at != "RCPT":
            raise ValueError("a fault for one recipient is given at RCPT")
        with self._cond:
            self._faults.add(_Reply(code, text), at, _address(recipient), times)

    def drop_after_data(self, times: int | None = 1) -> None:
        """At the next `times` DATA, take the message in (recorded, delivered) and close
        the connection instead of replying: the client cannot know it was sent."""
        with self._cond:
            self._faults.add(DROP, "DATA", None, times)

    def limit_size(self, octets: int) -> None:
        """Take mails of at most `octets` from the next connection on, as a server with a
        fixed maximum does (RFC 1870): its EHLO says `SIZE octets`; a MAIL declaring
        more is answered "552 Error: message size exceeds fixed maximum message size",
        a DATA longer "552 Error: Too much mail data" (aiosmtpd's words; neither is
        in `refused`, which holds the faults' replies)."""
        self.size_limit = octets

    def clear_faults(self) -> None:
        with self._cond:
            self._faults.clear()

    # -- serving (on the server's thread) -----------------------------------------------

    def _take_fault(self, stage: Stage, recipient: str | None = None) -> _Reply | str | None:
        with self._cond:
            return self._faults.take(stage, _address(recipient))

    def _refuse(self, refusal: Refusal) -> str:
        with self._cond:
            self._refused.append(refusal)
            self._cond.notify_all()
        return f"{refusal.code} {refusal.text}"

    def _take_in(self, session: Session, envelope: Envelope, dropped: bool) -> None:
        raw = envelope.original_content or b""
        delivered = []
        if self.mailboxes is not None:
            users = {user.lower(): user for user in self.mailboxes.users}
            for rcpt in envelope.rcpt_tos:
                user = users.get(rcpt.lower())
                if user is not None:
                    self.mailboxes.deliver(user, raw)
                    delivered.append(user)
        login = session.login_data.decode() if session.authenticated else None
        mail = ReceivedMail(envelope.mail_from or "", tuple(envelope.rcpt_tos), raw, login,
                            tuple(delivered), dropped)  # fmt: skip
        with self._cond:
            self._received.append(mail)
            self._cond.notify_all()

    def _record_internal_error(self) -> None:
        with self._cond:
            self._internal_errors.append(traceback.format_exc())
            self._cond.notify_all()

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert self.login is not None
        user, password = self.login
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
            user.encode(),
            password.encode(),
        )
        # handled=False: aiosmtpd answers 535 to a failure itself
        return AuthResult(success=ok, handled=False, auth_data=data if ok else None)


def _address(address: str | None) -> str | None:
    """An address as compared here: without angle brackets, lowercase."""
    return None if address is None else address.strip().strip("<>").lower()


class _Handler:
    """aiosmtpd's hooks (on the server's event loop): faults first, then the usual."""

    def __init__(self, fake: FakeSMTP) -> None:
        self.fake = fake

    async def handle_MAIL(  # noqa: N802 - aiosmtpd's name
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        options: list[str],
    ) -> str:
        fake = self.fake
        if fake.login is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        fault = fake._take_fault("MAIL")
        if isinstance(fault, _Reply):
            return fake._refuse(Refusal("MAIL", fault.code, fault.text, address, None))
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's name
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        options: list[str],
    ) -> str:
        fake = self.fake
        fault = fake._take_fault("RCPT", address)
        if isinstance(fault, _Reply):
            refusal = Refusal("RCPT", fault.code, fault.text, envelope.mail_from, address)
            return fake._refuse(refusal)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's name
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        fake = self.fake
        try:
            fault = fake._take_fault("DATA")
            if isinstance(fault, _Reply):
                refusal = Refusal("DATA", fault.code, fault.text, envelope.mail_from, None)
                return fake._refuse(refusal)
            fake._take_in(session, envelope, dropped=fault == DROP)
        except Exception:  # a bug of the fake: record it, answer as a server would
            fake._record_internal_error()
            return "451 4.3.0 the fake SMTP server failed (see its internal_errors)"
        if fault == DROP:
            assert server.transport is not None
            server.transport.close()  # the reply below goes nowhere
        return "250 2.0.0 OK: queued"
