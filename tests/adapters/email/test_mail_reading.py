"""What the email adapter reads from a mail before it trusts or answers it: whether the
receiving server vouches for the sender, and the new words of a reply."""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

import pytest

from hermes.adapters.email.authentication import vouched
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.content import body_text, new_words
from hermes.config import InputError, structure

TRUSTED = "mx.test"


@pytest.mark.parametrize(
    ("header", "domain", "believed"),
    [
        ("mx.test; dkim=pass header.d=example.org; dmarc=pass header.from=example.org",
         "example.org", True),
        ("mx.test 1; dmarc=pass (p=reject) header.from=example.org", "example.org", True),
        ("mx.test; dkim=pass header.d=example.org; dmarc=fail", "mail.example.org", True),
        ("mx.test; dkim=pass header.i=@example.org", "example.org", True),
        # signed by another domain, or by a top-level name: not aligned
        ("mx.test; dkim=pass header.d=evil.org; dmarc=fail", "example.org", False),
        ("mx.test; dkim=pass header.d=org", "example.org", False),
        # the From domain above the signer is not aligned with it
        ("mx.test; dkim=pass header.d=mail.example.org", "example.org", False),
        ("mx.test; dkim=fail header.d=example.org; dmarc=none", "example.org", False),
        # a header another server (or the sender) wrote is not read
        ("evil.example; dmarc=pass header.from=example.org", "example.org", False),
        ("(mx.test) evil.example; dmarc=pass", "example.org", False),
    ],
)  # fmt: skip
def test_a_sender_is_believed_only_on_the_trusted_servers_word(header, domain, believed):
    assert vouched([header], TRUSTED, domain) is believed


def test_any_one_trusted_header_of_several_is_enough():
    forged = "mx.test.evil; dmarc=pass"
    real = "MX.test; dmarc=pass header.from=example.org"
    assert vouched([forged, real], TRUSTED, "example.org")
    assert not vouched([forged], TRUSTED, "example.org") and not vouched([], TRUSTED, "x.org")


def mail(body: str, html: str | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["Subject"] = "ann@example.org", "hi"
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return BytesParser(policy=policy.default).parsebytes(message.as_bytes())


def test_the_text_part_is_preferred_and_html_alone_is_read_as_text():
    assert body_text(mail("plain words", "<p>html words</p>")) == "plain words"
    only_html = EmailMessage()
    only_html.set_content("<html><body><h1>Title</h1><p>Some words here.</p></body></html>",
                          subtype="html")  # fmt: skip
    assert "Some words here." in body_text(only_html) and "<p>" not in body_text(only_html)


@pytest.mark.parametrize(
    ("text", "new"),
    [
        ("Thanks, that works.\n\nOn Tue, 3 Dec 2026 at 10:00, hermes <h@x.org> wrote:\n> old",
         "Thanks, that works."),
        ("Ja.\n\nAm 03.12.2026 um 10:00 schrieb hermes <h@x.org>:\n> alt", "Ja."),
        ("Short.\n-----Original Message-----\nFrom: hermes", "Short."),
        ("Yes.\n-- \nAnn\nCEO, Example", "Yes."),
        ("Inline:\n> a question?\nan answer", "Inline:\nan answer"),
        ("> only what was quoted", "> only what was quoted"),  # nothing new: all of it
    ],
)  # fmt: skip
def test_quoted_history_and_signatures_are_left_out(text, new):
    assert new_words(text) == new


def test_plain_text_needs_allow_insecure_and_a_trusted_server_is_required():
    with pytest.raises(InputError, match="allow_insecure"):
        structure({"imap_security": "plain", "trusted_authserv_id": TRUSTED}, EmailConfig)
    with pytest.raises(InputError, match="trusted_authserv_id"):
        structure({}, EmailConfig)
    relaxed = structure({"require_authentication": False}, EmailConfig)
    assert relaxed.imap_port == 993 and relaxed.sessions == "thread"
