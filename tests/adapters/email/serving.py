"""`hermes serve` as a real process with its email adapter against a real Dovecot (IMAP)
and the test's SMTP server, both on loopback without TLS (`allow_insecure`)."""

from __future__ import annotations

import attrs

from tests.adapters.serving import Serve
from tests.fakes.dovecot import Dovecot
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, HERMES_PASSWORD
from tests.fakes.smtp import FakeSMTP

PASSWORD_VAR = "EMAIL_PASSWORD"
TRUSTED = "mx.test"
VOUCHED = f"{TRUSTED}; dkim=pass header.d=example.org; dmarc=pass header.from=example.org"


@attrs.frozen
class MailServers:
    imap: Dovecot
    smtp: FakeSMTP


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
            f"    imap_host: {servers.imap.host}\n    imap_port: {servers.imap.port}\n"
            f"    smtp_host: {servers.smtp.host}\n    smtp_port: {servers.smtp.port}\n"
            "    imap_security: plain\n    smtp_security: plain\n    allow_insecure: true\n"
            f"    trusted_authserv_id: {TRUSTED}\n"
        )
