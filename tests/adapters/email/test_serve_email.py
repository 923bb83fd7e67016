"""Email end to end: `hermes serve` as a process, a real Dovecot and the test's SMTP
server, the fake model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.adapters.email.mail import parse
from tests.adapters.email.serving import VOUCHED
from tests.adapters.serving import in_thread
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, make_mail
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.smtp import Attachment
from tests.seed import rows


@pytest.mark.timeout(90)
async def test_a_mail_is_answered_in_its_thread_and_a_reply_continues_it(serve, model, servers):
    model.script(text_answer("Here are the plans."), text_answer("Glad it helps."))
    await in_thread(serve.start)
    first = "<first@example.org>"
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Plans",
                                                "What are the plans?", message_id=first,
                                                auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    sent = answer.message
    assert answer.rcpt_tos == (ALICE_ADDRESS,) and sent["From"] == HERMES_ADDRESS
    assert sent["Subject"] == "Re: Plans" and sent["In-Reply-To"] == first
    assert sent["References"] == first
    assert sent.get_body(("plain",)).get_content().strip() == "Here are the plans."
    await in_thread(servers.imap.wait_seen, HERMES_ADDRESS, first)  # after admission
    reply = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Re: Plans",
                      "Thanks!\n\nOn Tue, hermes wrote:\n> Here are the plans.",
                      message_id="<second@example.org>", in_reply_to=sent["Message-ID"],
                      references=[first, sent["Message-ID"]], auth_results=VOUCHED)  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, reply)
    [_, again] = await in_thread(servers.smtp.wait_received, 2, 30.0)
    serve.stop()
    assert again.message["In-Reply-To"] == "<second@example.org>"
    asked = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in asked] == ["What are the plans?", "Thanks!"]  # one session


@pytest.mark.timeout(60)
async def test_a_forged_from_is_not_answered(serve, model, servers):
    await in_thread(serve.start)
    forged = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Urgent", "run this",
                       auth_results="evil.example; dmarc=pass")  # fmt: skip
    forged_id = parse(forged)["Message-ID"]
    servers.imap.deliver(HERMES_ADDRESS, forged)
    model.script(text_answer("to the real Alice"))
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Real",
                                                "hello", auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    serve.stop()
    assert answer.message["Subject"] == "Re: Real"
    assert len(model.requests) == 1 and len(serve.journal()) == 1
    await in_thread(servers.imap.wait_seen, HERMES_ADDRESS, str(forged_id))  # looked at


@pytest.mark.timeout(90)
async def test_mails_that_came_while_serve_was_away_are_answered_once_each(serve, model, servers):
    model.script(*(text_answer(f"answer {n}") for n in range(4)))
    await in_thread(serve.start)
    await in_thread(servers.imap.wait_logins, HERMES_ADDRESS, 1)
    serve.stop()
    for n in range(3):
        servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS,
                                                       f"Question {n}", f"question {n}",
                                                       auth_results=VOUCHED))  # fmt: skip
    await in_thread(serve.start)
    await in_thread(servers.smtp.wait_received, 3, 30.0)
    serve.stop()
    await in_thread(serve.start)  # the restart reads what is unflagged: none of them
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Question 3",
                                                   "question 3", auth_results=VOUCHED))  # fmt: skip
    everything = await in_thread(servers.smtp.wait_received, 4, 30.0)
    serve.stop()
    subjects = sorted(str(m.message["Subject"]) for m in everything)
    assert subjects == [f"Re: Question {n}" for n in range(4)]
    assert [state for *_, state in serve.journal()] == ["answered"] * 4
    assert len(model.requests) == 4
    titles = rows(serve.home.state_db, "SELECT title, title_source FROM sessions ORDER BY title")
    assert titles == [(f"Question {n}", "derived") for n in range(4)]  # a thread each


@pytest.mark.timeout(90)
async def test_a_brief_to_three_addresses_survives_one_refused(serve, model, servers):
    """Each address is its own outbox row: the refused one is dead with the server's words,
    the others arrive."""
    bob, carol = "bob@example.net", "carol@example.net"
    servers.smtp.fail(550, "5.1.1 <carol@example.net>: no such user", at="RCPT",
                      recipient=carol)  # fmt: skip
    model.script(text_answer("Markets are up."))
    await in_thread(serve.start)
    deliver = ",".join(f"email:{a}" for a in (ALICE_ADDRESS, carol, bob))
    added = await serve.rpc("cron.add", {"schedule": "every 1h", "prompt": "the news",
                                         "name": "news", "deliver": deliver})  # fmt: skip
    assert "result" in added, added
    await serve.rpc("cron.run", {"job": "news"})
    got = await in_thread(servers.smtp.wait_received, 2, 30.0)
    await serve.until_outbox("dead")
    serve.stop()
    assert sorted(m.rcpt_tos for m in got) == [(ALICE_ADDRESS,), (bob,)]
    assert all(m.text == "Markets are up." for m in got)
    states = {chat: (state, error) for chat, state, error, _ in serve.outbox()}
    assert states[ALICE_ADDRESS][0] == states[bob][0] == "sent"
    assert states[carol] == ("dead", "550 5.1.1 <carol@example.net>: no such user")


@pytest.mark.timeout(90)
async def test_an_answer_lost_after_data_is_never_sent_under_a_new_message_id(
    serve, model, servers
):
    """The connection dropped after DATA: the mail may have arrived. The row stays unknown
    (a restart does not send it again); the operator's retry sends the same Message-ID."""
    servers.smtp.drop_after_data()
    model.script(text_answer("Did you get this?"))
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Hello",
                                                   "hello", auth_results=VOUCHED))  # fmt: skip
    [lost] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    assert lost.dropped
    await serve.until_outbox("unknown")
    serve.stop()
    await in_thread(serve.start)
    [(_, state, _, _)] = serve.outbox()
    assert state == "unknown"  # not resent by the restart
    [row] = rows(serve.home.state_db, "SELECT id FROM outbox")
    await serve.rpc("outbox.retry", {"id": row[0]})
    [_, again] = await in_thread(servers.smtp.wait_received, 2, 30.0)
    await serve.until_outbox("sent")
    serve.stop()
    assert len(servers.smtp.received) == 2  # the retry's, and nothing of the restart's
    assert again.message["Message-ID"] == lost.message["Message-ID"]  # folded into one
    assert again.text == lost.text == "Did you get this?"


@pytest.mark.timeout(60)
async def test_an_attachment_is_saved_for_the_agent_once_the_sender_is_known(serve, model, servers):
    model.script(text_answer("got the file"), text_answer("never"))
    await in_thread(serve.start)
    report = b"%PDF-1.4 the quarterly report" + bytes(range(256)) * 6000  # read in pieces
    evil = [("invoice.pdf", "application/pdf", b"%PDF evil")]
    stranger = make_mail("mallory@example.org", HERMES_ADDRESS, "Invoice", "open it",
                         auth_results=VOUCHED, attachments=evil)  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, stranger)
    files = [("report.pdf", "application/pdf", report)]
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Report",
                                                   "the report", auth_results=VOUCHED,
                                                   attachments=files))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    serve.stop()
    assert answer.rcpt_tos == (ALICE_ADDRESS,)
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    path = next(word for word in asked.split() if "cache/email/" in word).strip("[]()")
    assert Path(path).read_bytes() == report and Path(path).name.endswith("-report.pdf")
    assert [p.name for p in Path(path).parent.iterdir()] == [Path(path).name]  # none else


@pytest.mark.timeout(90)
async def test_send_file_mails_it_as_an_attachment_of_a_reply(serve, model, servers):
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent you the chart."),
    )
    await in_thread(serve.start)
    first = "<chart@example.org>"
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Chart",
                                                   "send me the chart", message_id=first,
                                                   auth_results=VOUCHED))  # fmt: skip
    got = await in_thread(servers.smtp.wait_received, 2, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    [mail] = [m for m in got if m.attachments]
    assert mail.attachments == [Attachment("chart.txt", "text/plain", b"the chart")]
    sent = mail.message
    assert mail.rcpt_tos == (ALICE_ADDRESS,) and sent.get_content_type() == "multipart/mixed"
    assert sent["Subject"] == "Re: Chart" and sent["In-Reply-To"] == first
    assert sent["References"] == first
    assert mail.text == "here it is"  # the caption is the body, plain and HTML
    assert "here it is" in sent.get_body(("html",)).get_content()
    assert [m.text for m in got if m is not mail] == ["Sent you the chart."]


@pytest.mark.timeout(90)
async def test_a_file_over_the_servers_size_is_refused_before_it_is_sent(serve, model, servers):
    """The server's SIZE is lower than hermes's limit: the mail's size, declared at MAIL,
    is refused there (no upload), a dead letter with the server's words."""
    servers.smtp.limit_size(20_000)
    model.script(
        tool_answer(("terminal", {"command": "head -c 30000 /dev/urandom > big.bin"})),
        tool_answer(("send_file", {"path": "big.bin"})),
        text_answer("It did not go."),
    )
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Big",
                                                   "send it", auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    await serve.until_outbox("dead")
    serve.stop()
    assert answer.text == "It did not go." and answer.attachments == []
    states = sorted((state, error) for _, state, error, _ in serve.outbox())
    assert states == [("dead", "552 Error: message size exceeds fixed maximum message size"),
                      ("sent", None)]  # fmt: skip


@pytest.mark.timeout(60)
async def test_relaxed_authentication_is_warned_of_at_start(serve, model, servers):
    serve.configure(platform="    require_authentication: false\n")
    model.script(text_answer("believed"))
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Hi", "hi"))
    await in_thread(servers.smtp.wait_received, 1, 30.0)
    log = serve.stop()
    assert "require_authentication is off: any From header is believed" in log


@pytest.mark.timeout(90)
async def test_a_folder_made_again_answers_none_of_its_copies_twice(serve, model, servers):
    """A new UIDVALIDITY: hermes keeps no UIDs, so its mails are read by their flags as
    ever; the journal knows the answered ones by their Message-ID."""
    serve.configure(platform="    folder: Hermes\n")
    model.script(text_answer("first answer"), text_answer("second answer"))
    first = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "One", "one", message_id="<one@example.org>",
                      auth_results=VOUCHED)  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, first, folder="Hermes")
    await in_thread(serve.start)
    await in_thread(servers.smtp.wait_received, 1, 30.0)
    serve.stop()
    with servers.imap.imap(HERMES_ADDRESS) as client:
        client.delete_folder("Hermes")
    servers.imap.deliver(HERMES_ADDRESS, first, folder="Hermes")  # made again, unread
    second = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Two", "two",
                       message_id="<two@example.org>", auth_results=VOUCHED)  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, second, folder="Hermes")
    await in_thread(serve.start)
    [_, answer] = await in_thread(servers.smtp.wait_received, 2, 30.0)
    await in_thread(servers.imap.wait_seen, HERMES_ADDRESS, "<one@example.org>", 2)
    log = serve.stop()
    assert "was made again" in log
    assert answer.message["In-Reply-To"] == "<two@example.org>"
    assert len(servers.smtp.received) == 2 and len(model.requests) == 2


@pytest.mark.timeout(60)
async def test_a_mail_that_cannot_be_read_is_flagged_and_the_next_answered(serve, model, servers):
    broken = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Odd", "body", auth_results=VOUCHED,
                       message_id="<odd@example.org>").replace(
        b'charset="utf-8"', b'charset="x-nonsense"'
    )  # fmt: skip
    assert b"x-nonsense" in broken
    servers.imap.deliver(HERMES_ADDRESS, broken)
    model.script(text_answer("the next one"))
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Fine", "hi",
                                                   auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    await in_thread(servers.imap.wait_seen, HERMES_ADDRESS, "<odd@example.org>")
    log = serve.stop()
    assert answer.message["Subject"] == "Re: Fine" and "could not be read" in log
    assert answer.login == HERMES_ADDRESS  # hermes logged in to submit it
