"""Email end to end (`hermes serve` as a process, a real Dovecot, the test's SMTP server,
the fake model): a mail older than the journal remembers is not admitted again, and an
image in an answer reaches the reader as a link, never as a remote image."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.adapters.email.serving import VOUCHED
from tests.adapters.serving import in_thread
from tests.fakes.mailserver import ALICE_ADDRESS, HERMES_ADDRESS, make_mail
from tests.fakes.openai import text_answer

REFUSED = "is older than the journal remembers"


@pytest.mark.timeout(90)
async def test_a_mail_older_than_the_journal_remembers_is_refused_by_its_date(
    serve, model, servers
):
    """Its copy comes again (a mailbox synced again, a folder made again) after the journal
    forgot it: by its Date it is refused, logged once and flagged, never answered again.
    retention.journal_days is 1 here: a mail of two days ago is past it, one of twelve hours
    is not."""
    serve.configure(top="retention:\n  journal_days: 1\n")
    now = datetime.now(UTC)
    old = make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Old", "answered long ago",
                    message_id="<old@example.org>", date=now - timedelta(days=2),
                    auth_results=VOUCHED)  # fmt: skip
    servers.imap.deliver(HERMES_ADDRESS, old)
    model.script(text_answer("to the recent one"))
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Recent",
                                                   "this morning's", date=now - timedelta(hours=12),
                                                   message_id="<recent@example.org>",
                                                   auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    await in_thread(servers.imap.wait_seen, HERMES_ADDRESS, "<old@example.org>")  # looked at
    log = serve.stop()
    assert answer.message["In-Reply-To"] == "<recent@example.org>"
    assert [event_id for _, event_id, _ in serve.journal()] == ["<recent@example.org>"]
    assert len(model.requests) == 1
    assert log.count(REFUSED) == 1 and "alice@example.org's mail dated" in log


@pytest.mark.timeout(90)
async def test_an_image_in_an_answer_is_a_link_in_its_html_part(serve, model, servers):
    """A remote <img> loads when the mail is opened, telling its server who read the answer
    and when: a tracking pixel the model may be talked into writing."""
    model.script(text_answer("The chart: ![the chart](https://tracker.example/p.png) **done**"))
    await in_thread(serve.start)
    servers.imap.deliver(HERMES_ADDRESS, make_mail(ALICE_ADDRESS, HERMES_ADDRESS, "Chart",
                                                   "the chart?", auth_results=VOUCHED))  # fmt: skip
    [answer] = await in_thread(servers.smtp.wait_received, 1, 30.0)
    serve.stop()
    html = answer.message.get_body(("html",)).get_content()
    assert "<img" not in html.lower()
    assert '<a href="https://tracker.example/p.png">the chart</a>' in html
    assert "<strong>done</strong>" in html
    assert "![the chart](https://tracker.example/p.png)" in answer.text  # the plain part
