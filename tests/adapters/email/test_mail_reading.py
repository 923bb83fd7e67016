"""What the email adapter reads from a mail before it trusts or answers it: whether the
receiving server vouches for the sender, whether a person wrote it, the new words of a
reply, its attachments and its title."""

from __future__ import annotations

import json
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

import attrs
import pytest

from hermes.adapters.email.authentication import vouched
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.content import body_text, new_words
from hermes.adapters.email.mail import answer_mail, attachment, parse, read_mail
from hermes.config import InputError, structure
from tests.adapters.email.serving import TRUSTED, VOUCHED


@pytest.mark.parametrize(
    ("header", "domain", "believed"),
    [
        ("mx.test; dkim=pass header.d=example.org; dmarc=pass header.from=example.org",
         "example.org", True),
        ("mx.test 1; dmarc=pass (p=reject) header.from=example.org", "example.org", True),
        # DMARC passed for another domain than the From hermes read; no domain at all
        ("mx.test; dmarc=pass header.from=evil.test", "example.org", False),
        ("mx.test; dmarc=pass", "example.org", False),
        # a result inside a quoted value is a value
        ('mx.test; spf=pass smtp.mailfrom="a;dmarc=pass"@evil.test; dmarc=fail',
         "example.org", False),
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


def test_the_trusted_servers_header_is_found_among_others():
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
    assert body_text(mail("plain words", "<p>html words</p>")).text == "plain words"
    only_html = EmailMessage()
    only_html.set_content("<html><body><h1>Title</h1><p>Some words here.</p></body></html>",
                          subtype="html")  # fmt: skip
    read = body_text(only_html).text
    assert "Some words here." in read and "<p>" not in read


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


def test_plain_text_needs_allow_insecure():
    with pytest.raises(InputError, match="allow_insecure"):
        structure({"imap_security": "plain", "trusted_authserv_id": TRUSTED}, EmailConfig)
    relaxed = structure({"require_authentication": False}, EmailConfig)
    assert relaxed.imap_port == 993 and relaxed.sessions == "thread"


CONFIG = EmailConfig(address="hermes@example.net", trusted_authserv_id=TRUSTED)


def raw(subject: str = "Plans", body: str = "What are the plans?", **headers: str) -> bytes:
    message = EmailMessage()
    message["From"], message["To"] = "Ann <Ann@Example.org>", "hermes@example.net"
    message["Subject"] = subject
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message.as_bytes()


def test_a_vouched_mail_is_an_event_in_its_own_thread():
    read = read_mail(raw(Message_ID="<m1@example.org>", Authentication_Results=VOUCHED),
                     CONFIG, "email")  # fmt: skip
    event = read.event
    assert read.subject == "Plans" and event is not None
    assert (event.event_id, event.chat_id, event.user_id) == (
        "<m1@example.org>", "ann@example.org", "ann@example.org")  # fmt: skip
    assert event.thread_id == "<m1@example.org>" and event.user_name == "Ann"
    assert event.text == "What are the plans?"


def test_a_reply_joins_the_thread_of_the_first_mail():
    reply = raw(subject="Re: Plans", body="Sounds good.\n\nOn Tue, hermes wrote:\n> plans",
                Message_ID="<m3@example.org>", In_Reply_To="<h2@example.net>",
                References="<m1@example.org> <h2@example.net>",
                Authentication_Results=VOUCHED)  # fmt: skip
    event = read_mail(reply, CONFIG, "email").event
    assert (event.thread_id, event.reply_to, event.text) == (
        "<m1@example.org>", "<h2@example.net>", "Sounds good.")  # fmt: skip
    per_sender = attrs.evolve(CONFIG, sessions="sender")
    assert read_mail(reply, per_sender, "email").event.thread_id is None


def test_a_forged_from_is_not_an_event_and_says_why():
    forged = raw(Message_ID="<f@example.org>",
                 Authentication_Results="evil.example; dmarc=pass")  # fmt: skip
    read = read_mail(forged, CONFIG, "email")
    assert read.event is None and "mx.test does not vouch for ann@example.org" in read.why
    relaxed = attrs.evolve(CONFIG, require_authentication=False)
    assert read_mail(forged, relaxed, "email").event is not None


def test_a_mail_without_a_message_id_gets_a_stable_one():
    first, again = (read_mail(raw(Authentication_Results=VOUCHED), CONFIG, "email").event
                    for _ in range(2))  # fmt: skip
    assert first.event_id == again.event_id and first.event_id.endswith("@no-message-id>")


def test_an_answer_is_a_reply_in_its_thread_with_one_message_id_for_every_try():
    mail = answer_mail(CONFIG, "ann@example.org", "Here.\n\nTwo paragraphs <b>.", "reply:7:0",
                       0.0, "Plans", "<m1@example.org>", ("<m1@example.org>",))  # fmt: skip
    assert mail["Subject"] == "Re: Plans" and mail["In-Reply-To"] == "<m1@example.org>"
    assert mail["References"] == "<m1@example.org>"
    assert mail["From"] == "hermes@example.net" and mail["Message-ID"].endswith("@example.net>")
    again = answer_mail(CONFIG, "ann@example.org", "Here.", "reply:7:0", 1.0)
    assert again["Message-ID"] == mail["Message-ID"]  # a resend folds into the same mail
    assert mail.get_body(("plain",)).get_content().strip() == "Here.\n\nTwo paragraphs <b>."
    assert "<p>Two paragraphs &lt;b&gt;.</p>" in mail.get_body(("html",)).get_content()
    assert answer_mail(CONFIG, "a@x.org", "x", "k", 0.0)["Subject"] == "A message from hermes"


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"Auto_Submitted": "auto-replied"}, "Auto-Submitted: auto-replied"),
        ({"Precedence": "bulk"}, "Precedence: bulk"),
        ({"List_Id": "<news.example.org>"}, "a mailing list's"),
    ],
)  # fmt: skip
def test_a_programs_mail_is_never_answered(headers, why):
    read = read_mail(raw(Authentication_Results=VOUCHED, **headers), CONFIG, "email")
    assert read.event is None and why in read.why
    person = read_mail(raw(Authentication_Results=VOUCHED, Auto_Submitted="no"), CONFIG, "email")
    assert person.event is not None


def test_attachments_are_named_for_later_and_the_subject_is_the_title():
    message = EmailMessage()
    message["From"], message["Subject"] = "ann@example.org", "Re: Fwd: the report"
    message["Message-ID"], message["Authentication-Results"] = "<r@example.org>", VOUCHED
    message.set_content("see attached")
    message.add_attachment(b"%PDF-1", maintype="application", subtype="pdf", filename="q.pdf")
    event = read_mail(message.as_bytes(), CONFIG, "email").event
    assert event.title == "the report" and event.text == "see attached"
    [ref] = event.attachments
    named = json.loads(ref)
    assert (named["id"], named["name"]) == ("<r@example.org>", "q.pdf")
    assert attachment(parse(message.as_bytes()), named["part"]) == b"%PDF-1"
    with pytest.raises(ValueError, match="no attachment at part 0"):
        attachment(parse(message.as_bytes()), 0)


def test_only_the_topmost_header_of_the_trusted_server_counts():
    real = f"{TRUSTED}; dmarc=fail header.from=example.org"
    planted = f"{TRUSTED}; dmarc=pass header.from=example.org"  # came with the mail, below
    assert not vouched([real, planted], TRUSTED, "example.org")


def test_addresses_in_the_allowlist_are_written_in_lower_case():
    with pytest.raises(InputError, match="lower case"):
        structure({"trusted_authserv_id": TRUSTED, "allowed_users": ["Ann@Example.org"]},
                  EmailConfig)  # fmt: skip


def test_an_answer_says_a_program_wrote_it():
    assert answer_mail(CONFIG, "a@x.org", "x", "k", 0.0, "S", "<m@x>")["Auto-Submitted"] == (
        "auto-replied"
    )
    assert answer_mail(CONFIG, "a@x.org", "x", "k", 0.0)["Auto-Submitted"] == "auto-generated"


@pytest.mark.parametrize(
    "sender",
    ["alice@example.org <eve@evil.test>", "a@example.org, b@example.org", "nobody"],
)
def test_a_from_that_is_not_one_plain_address_is_not_believed(sender):
    mail = raw(Authentication_Results=VOUCHED)
    mail = mail.replace(b"From: Ann <Ann@Example.org>", f"From: {sender}".encode())
    read = read_mail(mail, CONFIG, "email")
    assert read.event is None and "exactly one address" in read.why


def test_a_long_threads_answers_keep_its_first_message_id():
    chain = " ".join(f"<m{n}@example.org>" for n in range(30))
    read = read_mail(raw(Message_ID="<m30@example.org>", References=chain,
                         Authentication_Results=VOUCHED), CONFIG, "email")  # fmt: skip
    assert read.event.thread_id == "<m0@example.org>"
    assert read.references[0] == "<m0@example.org>" and len(read.references) == 20
    assert read.references[-1] == "<m30@example.org>"


def test_the_html_part_is_the_markdown_rendered_and_what_the_model_wrote_as_html_is_text():
    text = "**Done.**\n\n- one\n- two\n\n<script>alert(1)</script> [x](javascript:alert(1))"
    html = answer_mail(CONFIG, "a@x.org", text, "k", 0.0).get_body(("html",)).get_content()
    assert "<strong>Done.</strong>" in html and "<li>two</li>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html
