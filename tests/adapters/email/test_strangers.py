"""A stranger's mail costs little before authorization: the email adapter in this process
(tests/adapters/inprocess.py) on a real Dovecot, admitting through the gateway's real
admission into a real state.db, so what a mail leaves behind is read back from there:
its journal row, and the thread kept for the answer (adapter_cursors) only for a sender
the platform's settings or pairing let in. And what of a mail is kept at all is capped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest
import trio

from hermes.actors.clock import Clock
from hermes.adapters.cursors import Cursors, put_cursor
from hermes.adapters.email.adapter import EmailAdapter
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.email.content import MAX_HTML
from hermes.adapters.email.mail import MAX_HEADER, read_mail
from hermes.config import Secrets
from hermes.gateway.admission import Admission
from hermes.state.pairing import attempt_approval, request_code
from tests.adapters.email.serving import PASSWORD_VAR, TRUSTED, VOUCHED, MailServers
from tests.adapters.inprocess import running
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, HERMES_PASSWORD, make_mail
from tests.seed import rows, writing

BOB = "bob@example.org"  # let in by pairing
MALLORY = "mallory@example.org"  # vouched for by the server, let in by nobody
CAROL = "carol@example.org"  # let in by gateway.owners alone
DAY = 86400.0


def config(servers: MailServers) -> EmailConfig:
    return EmailConfig(token_env=PASSWORD_VAR, address=HERMES_ADDRESS,
                       imap_host=servers.imap.host, imap_port=servers.imap.port,
                       smtp_host=servers.smtp.host, smtp_port=servers.smtp.port,
                       imap_security="plain", smtp_security="plain", allow_insecure=True,
                       trusted_authserv_id=TRUSTED, liveness_seconds=1.0,
                       allowed_users=(ALICE_ADDRESS,), owner=ALICE_ADDRESS)  # fmt: skip


@asynccontextmanager
async def adapter(
    servers: MailServers, registry, state_db: Path, named: frozenset[str] = frozenset()
) -> AsyncIterator[None]:
    """The adapter, admitting into `state_db`'s journal as serve does (no router: the
    events wait there, admitted); `named`: the senders gateway.owners and
    gateway.allowed_users name."""
    admit = Admission(registry, state_db, lambda: None, Clock())
    secrets = Secrets({PASSWORD_VAR: HERMES_PASSWORD}, frozenset())

    def cursors() -> Cursors:
        return Cursors(registry, state_db, Clock())

    async with running(EmailAdapter, "email", config(servers), secrets, admit, cursors=cursors,
                       named_users=named):  # fmt: skip
        yield


def html_mail(sender: str, subject: str, html: str, message_id: str) -> bytes:
    """A mail whose only body is HTML, as some clients and every newsletter send."""
    message = EmailMessage()
    message["Authentication-Results"] = VOUCHED
    message["From"], message["To"], message["Subject"] = sender, HERMES_ADDRESS, subject
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = message_id
    message.set_content(html, subtype="html")
    return message.as_bytes()


def journal_texts(state_db: Path) -> dict[str, str]:
    return dict(rows(state_db, "SELECT user_id, text FROM inbound_journal"))


def threads(state_db: Path) -> dict[str, dict]:
    """The threads kept, by sender."""
    found = rows(state_db, "SELECT key, value FROM adapter_cursors WHERE key LIKE 'email:thread:%'")
    return {key.split(":")[2]: json.loads(value) for key, value in found}


def approve_by_pairing(state_db: Path, user: str) -> None:
    """As `hermes pairing approve email CODE` does, on the code `user` was sent."""
    with writing(state_db) as conn:
        now = Clock().now()
        offer = request_code(conn, "email", user, None, now, user)
        attempt_approval(conn, "email", offer.code, now)


@pytest.mark.timeout(60)
async def test_only_a_sender_let_in_has_their_thread_kept_and_their_html_read(
    servers, registry, tmp_path
):
    """Alice by allowed_users, Bob by pairing (read from state.db), Carol by gateway.owners;
    Mallory by nobody."""
    state_db = tmp_path / "state.db"
    approve_by_pairing(state_db, BOB)
    page = "<html><body><p>{} wrote this paragraph in HTML.</p></body></html>"
    long_subject = "é" * 2000  # two bytes each: 4,000 bytes of UTF-8
    long_id = f"<{'x' * 3000}@example.org>"
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, long_subject,
                                                   "plain words", message_id=long_id,
                                                   references=["<root@example.org>"],
                                                   auth_results=VOUCHED))  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, html_mail(MALLORY, "Offer", page.format("Mallory"),
                                                   "<offer@example.org>"))  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, html_mail(CAROL, "Hi", page.format("Carol"),
                                                   "<hi@example.org>"))  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, html_mail(BOB, "Hello", page.format("Bob"),
                                                   "<hello@example.org>"))  # fmt: skip
    named = frozenset({CAROL})  # gateway.owners: ["email:carol@example.org"]
    async with adapter(servers, registry, state_db, named):  # mails are taken oldest first
        await trio.to_thread.run_sync(servers.imap.wait_seen, HERMES_ADDRESS, "<hello@example.org>")
    kept = threads(state_db)
    assert set(kept) == {BOB, ALICE_ADDRESS, CAROL}  # nothing of the stranger's in state.db
    assert kept[BOB] == {"subject": "Hello", "references": ["<hello@example.org>"]}
    subject = kept[ALICE_ADDRESS]["subject"]
    assert subject == "é" * (MAX_HEADER // 2)  # 1 KB, no character cut in two
    root, own = kept[ALICE_ADDRESS]["references"]
    assert root == "<root@example.org>"
    assert len(own.encode()) == MAX_HEADER and own.startswith("<xxx") and own.endswith(">")
    [(event_id,)] = rows(state_db, "SELECT event_id FROM inbound_journal WHERE user_id = ?",
                         ALICE_ADDRESS)  # fmt: skip
    assert event_id == own  # the journal's key is the same capped id
    texts = journal_texts(state_db)
    assert set(texts) == {MALLORY, BOB, ALICE_ADDRESS, CAROL}  # all admitted: the gateway decides
    assert "Carol wrote this paragraph in HTML." in texts[CAROL]
    assert "Mallory wrote" not in texts[MALLORY]  # the parser never saw a stranger's HTML
    assert "read only from senders" in texts[MALLORY]
    assert "Bob wrote this paragraph in HTML." in texts[BOB]
    assert texts[ALICE_ADDRESS] == "plain words"


@pytest.mark.parametrize(
    ("sender", "settings", "approved", "parsed"),
    [
        (MALLORY, {}, frozenset(), False),
        (MALLORY, {"allowed_users": (ALICE_ADDRESS,)}, frozenset({BOB}), False),
        (ALICE_ADDRESS, {"allowed_users": (ALICE_ADDRESS,)}, frozenset(), True),
        (ALICE_ADDRESS, {"owner": ALICE_ADDRESS}, frozenset(), True),
        (BOB, {}, frozenset({BOB}), True),
        (MALLORY, {"allow_all_users": True}, frozenset(), True),
    ],
)  # fmt: skip
def test_the_html_parser_runs_only_for_a_sender_the_settings_or_pairing_let_in(
    sender, settings, approved, parsed
):
    raw = html_mail(sender, "Hi", "<html><body><p>Words in HTML.</p></body></html>", "<h@x.org>")
    cfg = EmailConfig(trusted_authserv_id=TRUSTED, **settings)
    read = read_mail(raw, cfg, "email", approved=approved)
    assert ("Words in HTML." in read.event.text) is parsed
    assert read.let_in is parsed  # and only then is its thread kept


def test_a_subject_and_message_ids_are_cut_to_a_kilobyte_at_a_character_boundary():
    subject = "日本" * 1000  # three bytes each: 6,000 bytes
    raw = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, subject, "hi", message_id="<ID@example.org>",
                    references=[f"<{'r' * 5000}@example.org>"], auth_results=VOUCHED)  # fmt: skip
    raw = raw.replace(b"<ID@", f"<{'é' * 1000}@".encode())  # UTF-8 in a header (RFC 6532)
    read = read_mail(raw, EmailConfig(trusted_authserv_id=TRUSTED), "email")
    assert read.subject == "日本" * 170 + "日"  # 1,023 bytes: the 1,024th is inside a character
    assert read.event.title == read.subject
    root, own = read.references
    assert own == read.event.event_id == f"<{'é' * 511}>"  # 1,022 bytes inside its brackets
    assert root == read.event.thread_id == f"<{'r' * 1022}>"


@pytest.mark.timeout(60)
async def test_threads_are_forgotten_once_the_journal_forgot_their_mails(
    servers, registry, tmp_path
):
    state_db = tmp_path / "state.db"
    now = Clock().now()
    old = json.dumps({"subject": "Old", "references": ["<old@example.org>"]})
    with writing(state_db) as conn:  # kept by an earlier serve, 8 and 6 days ago
        put_cursor(conn, f"email:thread:{ALICE_ADDRESS}:<old@example.org>", old, now - 8 * DAY)
        put_cursor(conn, f"email:thread:{ALICE_ADDRESS}:<recent@example.org>", old, now - 6 * DAY)
        put_cursor(conn, "email:message-id-salt", "salt", now - 30 * DAY)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "New", "hi",
                                                   message_id="<new@example.org>",
                                                   auth_results=VOUCHED))  # fmt: skip
    async with adapter(servers, registry, state_db):  # retention.journal_days: 7
        await trio.to_thread.run_sync(servers.imap.wait_seen, HERMES_ADDRESS, "<new@example.org>")
    keys = {key for (key,) in rows(state_db, "SELECT key FROM adapter_cursors")}
    assert f"email:thread:{ALICE_ADDRESS}:<old@example.org>" not in keys
    assert {f"email:thread:{ALICE_ADDRESS}:<recent@example.org>",
            f"email:thread:{ALICE_ADDRESS}:<new@example.org>",
            "email:message-id-salt"} <= keys  # fmt: skip


def test_html_past_its_cap_is_not_handed_to_the_parser():
    """A megabyte of markup is parsed in about a second; the 25 MB a mail may be would
    take half a minute and gigabytes. What lies past the cap is not read, and the model
    is told so."""
    filler = "<div style='color:#333'></div>" * (MAX_HTML // 30 + 1)
    html = f"<html><body><p>The start of it all.</p>{filler}<p>Past the cap.</p></body></html>"
    raw = html_mail(ALICE_ADDRESS, "Big", html, "<big@example.org>")
    cfg = EmailConfig(trusted_authserv_id=TRUSTED, allowed_users=(ALICE_ADDRESS,))
    text = read_mail(raw, cfg, "email").event.text
    assert "The start of it all." in text and "Past the cap." not in text
    assert f"only its first {MAX_HTML:,} characters were read" in text


def test_a_strangers_sender_name_is_capped_too():
    raw = make_mail(f"{'N' * 5000} <{MALLORY}>", HERMES_ADDRESS, "Hi", "hi",
                    auth_results=VOUCHED)  # fmt: skip
    event = read_mail(raw, EmailConfig(trusted_authserv_id=TRUSTED), "email").event
    assert event.user_name == "N" * MAX_HEADER
