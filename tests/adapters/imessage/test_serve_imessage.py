"""iMessage end to end: one `hermes serve` process for the module (each test talks in chats
of its own), the fake BlueBubbles, the fake model. BlueBubbles tries a webhook once, so
what it could not deliver (serve stopped, a delivery that failed) comes by the catch-up,
and is answered once even when the webhook brings it too; a send whose answer was lost
is looked up by its text, since its first try, before it goes again."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from hermes.home import HermesHome
from tests.adapters.imessage.serving import WEBHOOK_TOKEN, IMessageServe
from tests.adapters.serving import in_thread
from tests.fakes.bluebubbles import ANN, PASSWORD, FakeBlueBubbles, dm, group
from tests.fakes.openai import FakeOpenAI, text_answer, tool_answer
from tests.seed import rows

pytestmark = pytest.mark.timeout(60)
USERS = [f"+1555000{n:04d}" for n in range(2, 12)]  # allowed, besides the owner
STRANGER = "+15559999999"


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[IMessageServe, FakeBlueBubbles, FakeOpenAI]]:
    """Serve on a home of the module's own, started once (a test that stops it starts it
    again)."""
    home = HermesHome(tmp_path_factory.mktemp("imessage") / "hermes-home").ensure()
    with FakeBlueBubbles() as fake, FakeOpenAI() as model:
        serve = IMessageServe(home, fake, model)
        allowed = ", ".join(f"'{u}'" for u in [ANN, *USERS])
        serve.configure(access=f"    allowed_users: [{allowed}]\n    owner: '{ANN}'\n"
                               "    group_policy: open\n")  # fmt: skip
        try:
            serve.start()
            fake.wait_until(lambda f: len(f.queries) >= 1, what="the first catch-up")
            yield serve, fake, model
            serve.stop()
        finally:
            serve.close()
        assert fake.internal_errors == []
        log = (home.logs / "hermes.log").read_text()
        assert PASSWORD not in log and WEBHOOK_TOKEN not in log  # nor any URL with them


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """The module's serve outlives each test: `shared` stops it once the module is done
    (tests/conftest.py's check is per test)."""
    yield


@pytest.fixture
def im(shared):
    return shared


async def sent_in(fake: FakeBlueBubbles, chat: str, count: int) -> list[dict]:
    """hermes's sends in `chat`, once there are `count`."""
    return await in_thread(functools.partial(fake.wait_sent, count, 30.0, channel=chat))


def journal_count(serve: IMessageServe) -> int:
    return rows(serve.home.state_db, "SELECT count(*) FROM inbound_journal")[0][0]


async def sent_rows(serve: IMessageServe, chat: str, count: int) -> list[str | None]:
    """The platform ids of the chat's outbox rows, once `count` of them are sent."""
    await serve.until_outbox("sent", count, 30.0, chat=chat)
    return [sent for c, _, _, sent in await in_thread(serve.outbox) if c == chat]


async def test_a_dm_is_answered_with_a_temp_guid_and_its_echo_is_not(im):
    serve, fake, model = im
    model.script(text_answer("hi there"))
    asked = len(model.requests)
    fake.message("hello", user=USERS[0])
    [sent] = await sent_in(fake, dm(USERS[0]), 1)
    assert sent["message"] == "hi there" and sent["method"] == "apple-script"
    assert sent["tempGuid"].startswith("hermes-")
    echo = await in_thread(fake.wait_delivered, sent["guid"])  # the server's own new-message
    assert echo["status_code"] == 200
    await serve.until_journal("answered", len(model.requests))
    assert len(model.requests) == asked + 1
    assert not [q for q in fake.queries if q.get("chatGuid") == dm(USERS[0])]  # a first try


async def test_a_group_is_answered_when_named_and_its_chatter_is_not(im):
    serve, fake, model = im
    model.script(text_answer("at your service"))
    asked = len(model.requests)
    chat = group("chat-book-club")
    fake.message("just chatting", user=USERS[1], chat=chat)
    fake.message("Hermes, can you help?", user=USERS[1], chat=chat)
    [sent] = await sent_in(fake, chat, 1)
    assert sent["message"] == "at your service"
    await serve.until_journal("answered", len(model.requests))
    assert len(model.requests) == asked + 1 and len(fake.sent_to(chat)) == 1


async def test_tapbacks_and_read_receipts_start_nothing(im):
    serve, fake, model = im
    model.script(text_answer("one"), text_answer("two"))
    asked, chat = len(model.requests), dm(USERS[2])
    first = fake.message("first", user=USERS[2])
    await sent_in(fake, chat, 1)
    taps = [fake.tapback(first, user=USERS[2]), fake.tapback(first, "like", user=USERS[2])]
    fake.read(first)
    for guid in taps:
        assert (await in_thread(fake.wait_delivered, guid))["status_code"] == 200
    fake.message("second", user=USERS[2])  # the chat's deliveries go in order
    await sent_in(fake, chat, 2)
    assert len(model.requests) == asked + 2
    events = {e for _, e, _ in serve.journal()}
    assert not events & set(taps)


async def test_a_delivery_without_the_token_is_refused_and_costs_nothing(im):
    serve, fake, model = im
    before, asked, fetched = journal_count(serve), len(model.requests), len(fake.downloads)
    guid = fake.message("let me in", user=ANN, token="guessed",
                        attachment=("x.txt", "data", "text/plain"))  # fmt: skip
    assert (await in_thread(fake.wait_delivered, guid))["status_code"] == 401
    assert journal_count(serve) == before and len(model.requests) == asked
    assert len(fake.downloads) == fetched


async def test_messages_sent_while_serve_was_stopped_are_answered_once_after(im):
    """Also one the webhook brought before the stop: the restart's catch-up brings it again
    (its margin), and the journal knows it."""
    serve, fake, model = im
    model.script(text_answer("before"), text_answer("back for you"), text_answer("and you"))
    asked = len(model.requests)
    webhook = fake.message("just before", user=USERS[7])
    await sent_in(fake, dm(USERS[7]), 1)
    serve.stop()
    failed = fake.message("are you up?", user=USERS[3])  # the webhook finds nobody
    assert "error" in await in_thread(fake.wait_delivered, failed)
    fake.message("hello?", user=USERS[4], deliver=False)  # a delivery the server lost
    serve.start()
    await sent_in(fake, dm(USERS[3]), 1)
    await sent_in(fake, dm(USERS[4]), 1)
    count = len(fake.queries)
    # the next catch-up's margin brings both again: the adapter knows them, no turn starts
    await in_thread(fake.wait_until, lambda f: len(f.queries) > count, 10.0, "a catch-up")
    journal = serve.journal()
    await serve.until_journal("answered", sum(state != "refused" for *_, state in journal))
    assert len(model.requests) == asked + 3
    assert len(fake.sent_to(dm(USERS[3]))) == 1 and len(fake.sent_to(dm(USERS[4]))) == 1
    # the one the webhook brought before the stop came again by the restart's catch-up
    [brought] = [m for m in fake.messages_in(dm(USERS[7])) if m["guid"] == webhook]
    assert fake.queries[-1]["after"] < brought["dateCreated"]
    assert len(fake.sent_to(dm(USERS[7]))) == 1


async def test_a_send_whose_answer_was_lost_is_found_by_its_text_not_sent_twice(im):
    """BlueBubbles's query has no tempGuid: hermes's text in the chat since the send's
    first try is its result; the same words said before it are not."""
    serve, fake, model = im
    model.script(text_answer("only once"), text_answer("same words"), text_answer("same words"))
    fake.lose_answer(sent=True)  # the server sent it; hermes never heard
    fake.message("tell me once", user=USERS[5])
    [sent] = await sent_in(fake, dm(USERS[5]), 1)
    assert await sent_rows(serve, dm(USERS[5]), 1) == [sent["guid"]]
    fake.message("say it", user=USERS[6])
    [before] = await sent_in(fake, dm(USERS[6]), 1)
    await sent_rows(serve, dm(USERS[6]), 1)
    fake.lose_answer(sent=False)  # the connection failed before the server sent it
    fake.message("say it again", user=USERS[6])
    [_, again] = await sent_in(fake, dm(USERS[6]), 2)
    assert again["message"] == before["message"] == "same words"
    assert await sent_rows(serve, dm(USERS[6]), 2) == [before["guid"], again["guid"]]
    lookups = [q["chatGuid"] for q in fake.queries if q.get("where")]
    assert lookups.count(dm(USERS[5])) == 1 and lookups.count(dm(USERS[6])) == 1
    assert len(fake.sent_to(dm(USERS[5]))) == 1 and len(fake.sent_to(dm(USERS[6]))) == 2


async def test_attachments_both_ways_and_a_strangers_is_never_fetched(im):
    serve, fake, model = im
    model.script(
        text_answer("read it"),
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent."),
    )
    fetched, uploaded = len(fake.downloads), len(fake.uploads)
    fake.message("what does it say?", user=ANN, attachment=("note.txt", "a note", "text/plain"))
    await sent_in(fake, dm(ANN), 1)
    assert len(fake.downloads) == fetched + 1
    assert "note.txt" in str(model.requests[-1]["body"]["messages"][-1])
    fake.message("send me the chart", user=ANN)
    await sent_in(fake, dm(ANN), 4)
    [upload] = fake.uploads[uploaded:]
    assert upload["name"].endswith("chart.txt") and upload["content"] == b"the chart"
    said = [s["message"] for s in fake.sent_to(dm(ANN))]
    assert said.index("here it is") == said.index("") - 1  # the caption, then the file
    guid = fake.message("look", user=STRANGER, attachment=("evil.txt", "x", "text/plain"))
    await serve.until_journal("refused", 1, event=guid)
    assert len(fake.downloads) == fetched + 1


async def test_a_webhook_admission_does_not_move_the_catch_up_past_a_failed_delivery(im):
    """A's delivery failed (BlueBubbles does not try again); B, two minutes later by the
    server's clock, comes by its webhook: the next catch-up still brings A. Late in the
    module: the server's clock stays ahead of hermes's, which a lost send's look-up (since
    its first try by hermes's clock) would not survive."""
    serve, fake, model = im
    model.script(text_answer("for b"), text_answer("for a"))
    count = len(fake.queries)
    await in_thread(fake.wait_until, lambda f: len(f.queries) > count, 10.0, "a catch-up")
    fake.message("did you get this?", user=USERS[9], deliver=False)  # right after it
    fake.pass_time(120)
    later = fake.message("and this?", user=USERS[9])
    assert (await in_thread(fake.wait_delivered, later))["status_code"] == 200
    said = await sent_in(fake, dm(USERS[9]), 2)
    assert sorted(s["message"] for s in said) == ["for a", "for b"]
    count = len(fake.queries)
    await in_thread(fake.wait_until, lambda f: len(f.queries) > count + 1, 10.0, "catch-ups")
    assert len(fake.sent_to(dm(USERS[9]))) == 2  # each answered once


async def test_with_the_private_api_it_sends_by_it_and_shows_typing(im):
    """Last in the module: serve restarts to read the server's info again, and sends by the
    private API from then on."""
    serve, fake, model = im
    fake.private_api(True)
    serve.stop()
    serve.start()
    model.script(text_answer("typed"))
    model.delay = 30.0  # the turn lasts until typing was shown
    try:
        fake.message("take your time", user=USERS[8])
        await in_thread(fake.wait_until, lambda f: f.typing, 30.0, "typing shown")
        model.pacing.set()  # the model answers now
        [sent] = await sent_in(fake, dm(USERS[8]), 1)
    finally:
        model.delay = 0.0
        model.pacing.clear()
    assert sent["method"] == "private-api" and fake.typing[0] == dm(USERS[8])
