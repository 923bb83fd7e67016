"""Fixtures of the email tests: a real Dovecot and the SMTP server (skipped, with the
install command, where Dovecot is missing), and serve on them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.email.serving import EmailServe, MailServers
from tests.adapters.serving import serving
from tests.fakes.dovecot import DOVECOT
from tests.fakes.mailserver import mail_servers


@pytest.fixture
def mail(require_system) -> Iterator[MailServers]:
    require_system(DOVECOT, packages=("dovecot-imapd",))
    with mail_servers() as (imap, smtp):
        yield MailServers(imap, smtp)


@pytest.fixture
def serve(home, model, mail) -> Iterator[EmailServe]:
    with serving(EmailServe, mail, home, model) as running:
        yield running
