"""The email test servers against Python's own clients: a real Dovecot (login, listing,
IDLE, flags, folders) and the SMTP server (records, delivers into Dovecot, faults)."""

from __future__ import annotations

import email
import email.policy
import imaplib
import smtplib
import socket
from collections.abc import Iterator

import pytest
from imapclient import IMAPClient
from imapclient.exceptions import LoginError

from tests.fakes import dovecot as dovecot_module
from tests.fakes.dovecot import DOVECOT, Dovecot
from tests.fakes.mailserver import (
    ALICE_ADDRESS,
    ALICE_PASSWORD,
    HERMES_ADDRESS,
    HERMES_PASSWORD,
    mail_servers,
    make_mail,
)
from tests.fakes.smtp import DEFAULT_SIZE_LIMIT, Attachment, FakeSMTP

AUTH = "mx.example.org; dkim=pass header.d=example.org; dmarc=pass header.from=example.org"
OUTSIDER = "bob@elsewhere.test"


@pytest.fixture
def servers(require_system) -> Iterator[tuple[Dovecot, FakeSMTP]]:
    require_system(DOVECOT, packages=("dovecot-imapd",))
    with mail_servers() as pair:
        yield pair


def _smtp(smtp: FakeSMTP) -> smtplib.SMTP:
    return smtplib.SMTP(smtp.host, smtp.port, timeout=10)


def test_a_delivered_mail_is_listed_over_imap(servers):
    imap, _ = servers
    raw = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Hello", "Hi hermes.",
                    message_id="<m1@example.org>", auth_results=AUTH)  # fmt: skip
    name = imap.deliver(HERMES_ADDRESS, raw)

    client = imaplib.IMAP4(imap.host, imap.port, timeout=10)
    try:
        client.login(HERMES_ADDRESS, HERMES_PASSWORD)
        assert client.select("INBOX") == ("OK", [b"1"])
        status, data = client.fetch("1", "(BODY.PEEK[])")
        assert status == "OK"
        assert data[0][1] == raw
        fetched = email.message_from_bytes(data[0][1], policy=email.policy.default)
        assert fetched["Authentication-Results"] == AUTH
    finally:
        client.logout()
    [stored] = imap.messages(HERMES_ADDRESS)
    assert (stored.name, stored.message_id, stored.subject) == (name, "<m1@example.org>", "Hello")
    assert not stored.seen

    bad = imaplib.IMAP4(imap.host, imap.port, timeout=10)
    try:
        with pytest.raises(imaplib.IMAP4.error, match="AUTHENTICATIONFAILED"):
            bad.login(HERMES_ADDRESS, "wrong")
    finally:
        bad.shutdown()


def test_idle_is_told_of_a_new_delivery(servers):
    imap, _ = servers
    imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "first", "1"))
    with IMAPClient(imap.host, imap.port, ssl=False, timeout=10) as client:
        client.login(HERMES_ADDRESS, HERMES_PASSWORD)
        client.select_folder("INBOX")
        client.idle()  # returns once the server said it is idling
        imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "second", "2"))
        responses = client.idle_check(timeout=10)
        client.idle_done()
        assert (2, b"EXISTS") in responses, responses
        subjects = [
            email.message_from_bytes(data[b"BODY[HEADER.FIELDS (SUBJECT)]"]).get("Subject")
            for data in client.fetch("2", ["BODY.PEEK[HEADER.FIELDS (SUBJECT)]"]).values()
        ]
        assert subjects == ["second"]


def test_flags_and_moves_by_the_client_show_in_messages(servers):
    imap, _ = servers
    imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "one", "1"))
    imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "two", "2"))
    imap.make_folder(HERMES_ADDRESS, "Processed")
    with imap.imap(HERMES_ADDRESS) as client:
        assert client.folder_exists("Processed")
        client.select_folder("INBOX")
        uids = client.search("ALL")
        assert len(uids) == 2
        client.add_flags(uids[0], [b"\\Seen", b"\\Answered", b"hermes-done"])
        client.move(uids[1], "Processed")

    [one] = imap.messages(HERMES_ADDRESS)
    assert one.subject == "one"
    assert one.flags == {"\\Seen", "\\Answered", "hermes-done"}
    [two] = imap.messages(HERMES_ADDRESS, "Processed")
    assert (two.subject, two.flags) == ("two", frozenset())


def test_a_changed_password_and_a_kick_end_a_session_and_refuse_the_next(servers):
    imap, _ = servers
    client = imap.imap(HERMES_ADDRESS)
    client.select_folder("INBOX")
    imap.set_password(HERMES_ADDRESS, "new-secret")
    assert len(imap.kick(HERMES_ADDRESS)) == 1 and imap.kick(ALICE_ADDRESS) == []
    with pytest.raises((OSError, IMAPClient.AbortError)):
        client.noop()
    with pytest.raises(LoginError):
        IMAPClient(imap.host, imap.port, ssl=False).login(HERMES_ADDRESS, HERMES_PASSWORD)
    with imap.imap(HERMES_ADDRESS) as fresh:  # with the new one
        assert fresh.select_folder("INBOX")[b"EXISTS"] == 0
    imap.wait_logins(HERMES_ADDRESS, 2)  # Dovecot's log writer may be behind its answers
    assert imap.logins(HERMES_ADDRESS) == 2


def test_what_a_client_did_is_waited_for_in_the_log(servers):
    imap, _ = servers
    imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "new", "1",
                                           message_id="<seen@example.org>"))  # fmt: skip
    with imap.imap(HERMES_ADDRESS) as client:
        client.select_folder("INBOX")
        client.add_flags(client.search(["ALL"]), [b"\\Seen"])
    imap.wait_seen(HERMES_ADDRESS, "<seen@example.org>")
    imap.wait_logins(HERMES_ADDRESS, 1)
    with pytest.raises(TimeoutError):
        imap.wait_seen(HERMES_ADDRESS, "<seen@example.org>", count=2, timeout=0.2)


def test_smtp_records_and_delivers_into_dovecot(servers):
    imap, smtp = servers
    raw = make_mail(HERMES_ADDRESS, [ALICE_ADDRESS, OUTSIDER], "Re: Hello", "An answer.",
                    message_id="<a1@hermes.test>", in_reply_to="<m1@example.org>",
                    references=["<m1@example.org>"], html="<p>An answer.</p>")  # fmt: skip
    with _smtp(smtp) as client:
        assert client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS, OUTSIDER], raw) == {}

    [got] = smtp.wait_received(1)
    assert got.mail_from == HERMES_ADDRESS
    assert got.rcpt_tos == (ALICE_ADDRESS, OUTSIDER)
    assert got.delivered_to == (ALICE_ADDRESS,)
    assert (got.login, got.dropped) == (None, False)
    assert got.message["In-Reply-To"] == "<m1@example.org>"
    assert got.message.get_body(("html",)).get_content().strip() == "<p>An answer.</p>"

    with IMAPClient(imap.host, imap.port, ssl=False, timeout=10) as client:
        client.login(ALICE_ADDRESS, ALICE_PASSWORD)
        client.select_folder("INBOX", readonly=True)
        [data] = client.fetch(client.search("ALL"), ["BODY.PEEK[]"]).values()
    assert data[b"BODY[]"] == got.raw
    assert [m.message_id for m in imap.messages(ALICE_ADDRESS)] == ["<a1@hermes.test>"]
    assert imap.messages(HERMES_ADDRESS) == []
    assert smtp.internal_errors == []


def test_smtp_answers_4xx_on_demand_then_takes_the_retry(servers):
    imap, smtp = servers
    smtp.fail(451, "4.3.0 try later")
    raw = make_mail(HERMES_ADDRESS, ALICE_ADDRESS, "brief", "Today.")
    with _smtp(smtp) as client:
        with pytest.raises(smtplib.SMTPDataError) as refused:
            client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
        assert (refused.value.smtp_code, refused.value.smtp_error) == (451, b"4.3.0 try later")
        assert smtp.received == []
        client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
    assert len(smtp.wait_received(1)) == 1
    assert [(r.stage, r.code) for r in smtp.refused] == [("DATA", 451)]
    assert len(imap.messages(ALICE_ADDRESS)) == 1


def test_smtp_refuses_one_recipient_with_5xx(servers):
    _, smtp = servers
    smtp.fail(550, "5.1.1 no such user", at="RCPT", recipient=OUTSIDER, times=None)
    raw = make_mail(HERMES_ADDRESS, [ALICE_ADDRESS, OUTSIDER], "brief", "Today.")
    with _smtp(smtp) as client:
        refused = client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS, OUTSIDER], raw)
        assert refused == {OUTSIDER: (550, b"5.1.1 no such user")}
        with pytest.raises(smtplib.SMTPRecipientsRefused) as all_refused:
            client.sendmail(HERMES_ADDRESS, [OUTSIDER], raw)
        assert all_refused.value.recipients == {OUTSIDER: (550, b"5.1.1 no such user")}
    [got] = smtp.wait_received(1)
    assert (got.rcpt_tos, got.delivered_to) == ((ALICE_ADDRESS,), (ALICE_ADDRESS,))
    assert [(r.stage, r.recipient) for r in smtp.refused] == [("RCPT", OUTSIDER)] * 2


def test_smtp_drops_the_connection_after_data(servers):
    imap, smtp = servers
    smtp.drop_after_data()
    raw = make_mail(HERMES_ADDRESS, ALICE_ADDRESS, "answer", "Done.", message_id="<u1@hermes.test>")
    client = _smtp(smtp)
    with pytest.raises(smtplib.SMTPServerDisconnected):
        client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
    client.close()
    # The server took it in: the client cannot tell, but the mail did arrive.
    [got] = smtp.wait_received(1)
    assert got.dropped
    assert [m.message_id for m in imap.messages(ALICE_ADDRESS)] == ["<u1@hermes.test>"]
    with _smtp(smtp) as again:  # the next connection is served as usual
        again.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
    assert [m.dropped for m in smtp.wait_received(2)] == [True, False]


def test_smtp_reads_a_received_mails_attachments(servers):
    _, smtp = servers
    chart = bytes(range(256)) * 3
    files = [("chart.png", "image/png", chart), ("notes.txt", "text/plain", b"a\r\nb")]
    raw = make_mail(HERMES_ADDRESS, ALICE_ADDRESS, "files", "Two files.", attachments=files)
    with _smtp(smtp) as client:
        client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
    [got] = smtp.wait_received(1)
    assert got.text == "Two files."
    assert got.attachments == [Attachment("chart.png", "image/png", chart),
                               Attachment("notes.txt", "text/plain", b"a\r\nb")]  # fmt: skip


def test_smtp_refuses_a_mail_over_its_size_limit(servers):
    _, smtp = servers
    raw = make_mail(HERMES_ADDRESS, ALICE_ADDRESS, "big", "x" * 5000)
    with _smtp(smtp) as client:
        client.ehlo()
        assert client.esmtp_features["size"] == str(DEFAULT_SIZE_LIMIT)
    smtp.limit_size(len(raw) - 1)
    with _smtp(smtp) as client:
        client.ehlo()
        assert client.esmtp_features["size"] == str(len(raw) - 1)
        with pytest.raises(smtplib.SMTPSenderRefused) as declared:  # sendmail says SIZE
            client.sendmail(HERMES_ADDRESS, [ALICE_ADDRESS], raw)
        assert declared.value.smtp_code == 552
        assert b"exceeds fixed maximum message size" in declared.value.smtp_error
        client.rset()
        assert client.mail(HERMES_ADDRESS)[0] == 250 and client.rcpt(ALICE_ADDRESS)[0] == 250
        assert client.data(raw) == (552, b"Error: Too much mail data")  # undeclared
    assert smtp.received == [] and smtp.refused == []


def test_smtp_requires_auth_when_given_a_login():
    with FakeSMTP(login=("hermes", "smtp-secret")) as smtp:
        raw = make_mail(HERMES_ADDRESS, OUTSIDER, "hi", "there")
        with _smtp(smtp) as client:
            with pytest.raises(smtplib.SMTPSenderRefused) as unauthenticated:
                client.sendmail(HERMES_ADDRESS, [OUTSIDER], raw)
            assert unauthenticated.value.smtp_code == 530
            with pytest.raises(smtplib.SMTPAuthenticationError):
                client.login("hermes", "wrong")
        for mechanism in ("PLAIN", "LOGIN"):
            with _smtp(smtp) as client:
                client.user, client.password = "hermes", "smtp-secret"
                client.ehlo()
                client.auth(mechanism, getattr(client, f"auth_{mechanism.lower()}"))
                client.sendmail(HERMES_ADDRESS, [OUTSIDER], raw)
        got = smtp.wait_received(2)
        assert [(m.login, m.delivered_to) for m in got] == [("hermes", ())] * 2


def test_dovecot_retries_a_port_taken_meanwhile(require_system, taken_port, monkeypatch):
    require_system(DOVECOT, packages=("dovecot-imapd",))
    ports = iter([taken_port])
    real_free_port = dovecot_module.free_port
    monkeypatch.setattr(dovecot_module, "free_port", lambda: next(ports, None) or real_free_port())
    with Dovecot({HERMES_ADDRESS: HERMES_PASSWORD}) as imap:
        assert imap.port not in (0, taken_port)
        assert "Address already in use" not in imap.log
        with socket.create_connection((imap.host, imap.port), timeout=10) as conn:
            assert conn.recv(100).startswith(b"* OK")


def test_make_mail_builds_what_a_client_sends():
    raw = make_mail(ALICE_ADDRESS, [HERMES_ADDRESS], "Report", "See attached.",
                    in_reply_to="<a@x>", references=["<r@x>", "<a@x>"], auth_results=AUTH,
                    html="<b>See attached.</b>",
                    attachments=[("r.csv", "text/csv", b"a,b\n1,2\n")])  # fmt: skip
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert msg["References"] == "<r@x> <a@x>"
    assert msg["Authentication-Results"] == AUTH
    assert msg["Message-ID"].endswith("@example.org>")
    assert msg.get_body(("plain",)).get_content().strip() == "See attached."
    [part] = msg.iter_attachments()
    assert (part.get_filename(), part.get_content_type()) == ("r.csv", "text/csv")
    assert part.get_payload(decode=True) == b"a,b\n1,2\n"
