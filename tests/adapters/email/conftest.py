"""Fixtures of the email tests: a real Dovecot and the SMTP server (skipped, with the
install command, where Dovecot is missing), and serve on them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.email.serving import EmailServe, MailServers, mail
from tests.adapters.serving import serving
from tests.fakes.dovecot import DOVECOT


@pytest.fixture
def servers(require_system) -> Iterator[MailServers]:
    require_system(DOVECOT, packages=("dovecot-imapd",))
    with mail() as running:
        yield running


@pytest.fixture
def serve(home, model, servers) -> Iterator[EmailServe]:
    with serving(EmailServe, servers, home, model) as running:
        yield running
