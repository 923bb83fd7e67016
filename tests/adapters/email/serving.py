"""`hermes serve` as a real process with its email adapter against a real Dovecot (IMAP)
and the test's SMTP server, both on loopback without TLS (`allow_insecure`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit

import attrs

from tests.adapters.relay import HeldRelay
from tests.adapters.serving import Serve
from tests.fakes.dovecot import Dovecot
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, HERMES_PASSWORD, mail_servers
from tests.fakes.smtp import FakeSMTP

PASSWORD_VAR = "EMAIL_PASSWORD"
TRUSTED = "mx.test"
VOUCHED = f"{TRUSTED}; dkim=pass header.d=example.org; dmarc=pass header.from=example.org"


@attrs.frozen
class MailServers:
    """Dovecot, reached through a relay that can make a session go silent (`deafen`), and
    the SMTP server."""

    imap: Dovecot
    smtp: FakeSMTP
    relay: HeldRelay

    @property
    def imap_port(self) -> int:
        """Where serve reaches IMAP: the relay's port."""
        return urlsplit(self.relay.url).port or 0

    def deafen(self) -> None:
        """The IMAP sessions open now stop answering (no reply, no close), as behind a
        dead network path; a new login answers."""
        self.relay.silence()


@contextlib.contextmanager
def mail() -> Iterator[MailServers]:
    """The servers, the SMTP one asking hermes's login as every submission server does."""
    login = (HERMES_ADDRESS, HERMES_PASSWORD)
    with (
        mail_servers(smtp_login=login) as (imap, smtp),
        HeldRelay(f"imap://{imap.host}:{imap.port}") as relay,
    ):
        yield MailServers(imap, smtp, relay)


class EmailServe(Serve):
    """Serve with `platforms.email` on the test's mail servers; Alice may write."""

    name = "email"
    access = f"    allowed_users: ['{ALICE_ADDRESS}']\n    owner: '{ALICE_ADDRESS}'\n"

    def tokens(self) -> dict[str, str]:
        return {PASSWORD_VAR: HERMES_PASSWORD}

    def settings(self) -> str:
        servers: MailServers = self.platform
        return (
            f"    token_env: {PASSWORD_VAR}\n    address: {HERMES_ADDRESS}\n"
            f"    imap_host: {servers.imap.host}\n    imap_port: {servers.imap_port}\n"
            f"    smtp_host: {servers.smtp.host}\n    smtp_port: {servers.smtp.port}\n"
            "    imap_security: plain\n    smtp_security: plain\n    allow_insecure: true\n"
            f"    trusted_authserv_id: {TRUSTED}\n"
            "    liveness_seconds: 1\n"  # a silent connection is replaced after 3 s
        )
