"""Signal end to end: `hermes serve` as a process on the fake signal-cli daemon, the fake
model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.serving import in_thread
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.signal import ACCOUNT, ALICE, BOB, CAROL

EVERYONE = f"    allowed_users: ['{ALICE}', '{BOB}', '{CAROL}']\n    owner: '{ALICE}'\n"


def user_words(model) -> list[str]:
    return [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]


@pytest.mark.timeout(60)
async def test_a_direct_message_is_answered_with_styles_and_a_quote(serve, model, daemon):
    model.script(text_answer("Hello **Alice**."))
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    said = daemon.message(ALICE, "hello hermes")
    [sent] = await in_thread(daemon.wait_sent, 1, 30.0)
    serve.stop()
    assert sent["recipients"] == [ALICE] and sent["message"] == "Hello Alice."
    assert sent["text_styles"] == ["6:5:BOLD"]
    assert (sent["quote_timestamp"], sent["quote_author"]) == (said["timestamp"], ALICE)
    assert user_words(model) == ["hello hermes"]


@pytest.mark.timeout(60)
async def test_in_a_group_a_mention_is_answered_and_chatter_is_not(serve, model, daemon):
    group = daemon.group("Team", [ACCOUNT, ALICE, BOB])
    model.script(text_answer("It is noon."))
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    daemon.message(BOB, "lunch anyone?", group=group)
    daemon.message(ALICE, "not now, Bob", group=group)
    daemon.message(ALICE, "\ufffc what time is it?", group=group, mentions=[ACCOUNT])
    [sent] = await in_thread(daemon.wait_sent, 1, 30.0)
    serve.stop()
    assert sent["group_ids"] == [group] and sent["message"] == "It is noon."
    assert user_words(model) == ["@hermes what time is it?"] and len(model.requests) == 1


@pytest.mark.timeout(90)
async def test_messages_sent_while_serve_is_away_wait_on_signal_and_are_answered_once(
    serve, model, daemon
):
    serve.configure(access=EVERYONE)
    model.script(*(text_answer(f"answer {n}") for n in range(3)))
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    serve.stop()
    for n, who in enumerate((ALICE, BOB, CAROL)):  # nobody connected: they stay on Signal
        daemon.message(who, f"question {n}")
    assert len(daemon.pending) == 3
    await in_thread(serve.start)
    sent = await in_thread(daemon.wait_sent, 3, 30.0)
    serve.stop()
    await in_thread(serve.start)  # nothing is delivered twice
    await in_thread(daemon.wait_open_streams, 1)
    serve.stop()
    assert sorted(s["message"] for s in sent) == ["answer 0", "answer 1", "answer 2"]
    assert [state for *_, state in serve.journal()] == ["answered"] * 3
    assert len(daemon.sent) == 3


@pytest.mark.timeout(120)
async def test_serve_killed_between_receiving_and_answering_answers_once(serve, model, daemon):
    serve.configure(access=EVERYONE)
    model.delay = 30.0
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    asked = daemon.message(ALICE, "are you there?")
    await in_thread(model.wait_requests, 1)
    serve.kill()
    model.delay = 0.0
    # After the restart both turns run at once: each is answered by what it asked.
    model.answer_when("are you there?", text_answer("yes, here"))
    daemon.message(BOB, "still there?")  # comes while serve is away
    model.answer_when("still there?", text_answer("still here"))
    await in_thread(serve.start)
    sent = await in_thread(daemon.wait_sent, 2, 30.0)
    serve.stop()
    assert sorted(s["message"] for s in sent) == [
        "(answered after hermes restarted) yes, here", "still here"]  # fmt: skip
    [admitted] = [d["id"] for d in daemon.delivered if d["timestamp"] == asked["timestamp"]]
    assert daemon.last_event_ids[-1] == admitted  # the restart asked for what came after it
    assert [state for *_, state in serve.journal()] == ["answered"] * 2


@pytest.mark.timeout(60)
async def test_an_allowed_users_attachment_is_read_for_the_agent_and_a_strangers_never(
    serve, model, daemon
):
    model.script(text_answer("got the file"))
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    evil = daemon.attachment(b"%PDF evil", "application/pdf", "invoice.pdf")
    daemon.message("+15559999999", "open it", attachments=[evil])
    report = b"%PDF-1.4 the quarterly report" + bytes(range(256)) * 4000
    daemon.message(ALICE, "the report", attachments=[daemon.attachment(
        report, "application/pdf", "report.pdf")])  # fmt: skip
    await in_thread(daemon.wait_sent, 1, 30.0)  # the stranger is not answered
    serve.stop()
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    path = next(word for word in asked.split() if "cache/signal/" in word).strip("[]()")
    assert Path(path).read_bytes() == report and Path(path).name.endswith("-report.pdf")
    assert len(daemon.attachment_reads) == 1 and len(daemon.sent) == 1


@pytest.mark.timeout(60)
async def test_an_untrusted_identity_is_never_trusted_and_the_owner_is_told(serve, model, daemon):
    serve.configure(access=EVERYONE)
    daemon.untrust(BOB)  # Bob's safety number changed
    model.script(text_answer("for Bob"))
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    daemon.message(BOB, "hello")
    [told] = await in_thread(daemon.wait_sent, 1, 30.0)
    await serve.until_outbox("dead")
    serve.stop()
    assert told["recipients"] == [ALICE] and BOB in told["message"]
    assert f"trust -a {BOB}" in told["message"]
    assert not daemon.trusted
    [(chat, _, error, _)] = serve.outbox()
    assert chat == BOB and "safety number changed" in error


@pytest.mark.timeout(60)
async def test_send_file_goes_to_the_owners_dm_as_an_attachment(serve, model, daemon):
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent you the chart."),
    )
    await in_thread(serve.start)
    await in_thread(daemon.wait_open_streams, 1)
    daemon.message(ALICE, "send me the chart")
    [upload] = await in_thread(daemon.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    assert upload["recipients"] == [ALICE] and upload["filename"].endswith("chart.txt")
    assert upload["content"] == b"the chart" and upload["content_type"] == "text/plain"
    assert upload["message"] == "here it is"
    assert [s["message"] for s in daemon.sent] == ["here it is", "Sent you the chart."]
