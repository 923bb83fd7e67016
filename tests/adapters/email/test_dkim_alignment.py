"""A DKIM signature vouches for a From address only when its signing domain is that
address's domain or one a whole label or more above it: `dkim=pass header.d=xample.org`
says nothing of `@example.org`, though one string ends with the other. The email adapter
in this process, on a real Dovecot, reads mails signed by look-alike domains, takes none
of them to admission (each is read and flagged), and admits the one signed by the
sender's own domain."""

from __future__ import annotations

import functools
from email.utils import make_msgid

import pytest

from hermes.adapters.email.adapter import EmailAdapter
from hermes.adapters.email.authentication import vouched
from hermes.adapters.email.config import EmailConfig
from hermes.config import Secrets
from tests.adapters.email.serving import PASSWORD_VAR, TRUSTED, MailServers
from tests.adapters.inprocess import Admissions, running
from tests.adapters.serving import in_thread
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, HERMES_PASSWORD, make_mail

LOOK_ALIKES = (  # signed by a domain the From's domain merely ends with
    f"{TRUSTED}; dkim=pass header.d=xample.org",
    f"{TRUSTED}; dkim=pass header.d=le.org",
    f"{TRUSTED}; dkim=pass header.i=@xample.org",
)
ALIGNED = f"{TRUSTED}; dkim=pass header.d=example.org"  # no DMARC result: DKIM alone


@pytest.mark.parametrize(
    ("signer", "domain", "aligned"),
    [
        ("header.d=xample.org", "example.org", False),
        ("header.d=le.org", "example.org", False),
        ("header.i=@xample.org", "example.org", False),
        ("header.d=ample.org", "mail.example.org", False),
        ("header.d=example.org", "example.org", True),
        ("header.d=example.org", "mail.example.org", True),
        ("header.i=ann@example.org", "example.org", True),
    ],
)
def test_a_signer_is_aligned_by_whole_labels(signer, domain, aligned):
    assert vouched([f"{TRUSTED}; dkim=pass {signer}"], TRUSTED, domain) is aligned


@pytest.mark.timeout(60)
async def test_the_adapter_admits_no_mail_a_look_alike_domain_signed(servers: MailServers):
    config = EmailConfig(token_env=PASSWORD_VAR, address=HERMES_ADDRESS,
                         imap_host=servers.imap.host, imap_port=servers.imap.port,
                         smtp_host=servers.smtp.host, smtp_port=servers.smtp.port,
                         imap_security="plain", smtp_security="plain", allow_insecure=True,
                         trusted_authserv_id=TRUSTED, liveness_seconds=1.0)  # fmt: skip
    secrets = Secrets({PASSWORD_VAR: HERMES_PASSWORD}, frozenset())
    admissions = Admissions()
    async with running(EmailAdapter, "email", config, secrets, admissions):
        await in_thread(servers.imap.wait_logins, HERMES_ADDRESS)
        forged = []
        for header in LOOK_ALIKES:
            forged.append(make_msgid(domain="example.org"))
            mail = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Hi", "let me in",
                             message_id=forged[-1], auth_results=header)  # fmt: skip
            servers.imap.deliver(HERMES_ADDRESS, mail)
        signed = make_msgid(domain="example.org")
        servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Hi",
                                                       "it is me", message_id=signed,
                                                       auth_results=ALIGNED))  # fmt: skip
        await admissions.wait_for(signed)
        for message_id in forged:  # read, and done with
            await in_thread(functools.partial(servers.imap.wait_seen, HERMES_ADDRESS, message_id))
    assert admissions.ids == [signed]
    assert [e.text for e in admissions.events] == ["it is me"]
