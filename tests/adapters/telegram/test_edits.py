"""Edits on Telegram (SendRequest.edit_of: a streamed answer, edited as it grows), through
the adapter in this process (tests/adapters/inprocess.py) against the fake Bot API: an
edit is `editMessageText` of that message with a send's formatting and buttons, and
Telegram's answers are read as the outbox needs them: "not modified" is done, a message
gone is Permanent(missing), a 429 is its retry_after."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from hermes.adapters.contract import Permanent, RetryAfter, SendRequest, Sent, Target
from tests.adapters.inprocess import Admissions, Running
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN, TOKEN
from tests.adapters.telegram.test_buttons import KEYBOARD, PROMPT, adapter_on
from tests.fakes.telegram import CANT_EDIT, EDIT_NOT_FOUND, NOT_MODIFIED, FakeTelegram

DM = Target("telegram", str(ANN))


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake
        assert fake.internal_errors == []


async def first(run: Running, text: str, target: Target = DM, **fields) -> SendRequest:
    """Send `text` as a new message: the request that edits it (its `edit_of` set)."""
    request = SendRequest(target, text, f"key-{text}", **fields)
    sent = await run.send(request)
    assert isinstance(sent, Sent) and sent.message_id is not None, sent
    return attrs.evolve(request, edit_of=sent.message_id)


def edit_calls(tg: FakeTelegram) -> list[dict]:
    return [c["params"] for c in tg.calls if c["method"] == "editMessageText"]


@pytest.mark.timeout(30)
async def test_an_edit_replaces_the_text_formatted_and_plain(tg):
    forum, topic = -1001000000077, 77
    async with adapter_on(tg, Admissions()) as run:
        growing = await first(run, "Hel", Target("telegram", str(forum), str(topic)),
                              reply_to="5")  # fmt: skip
        mid = growing.edit_of
        formatted = attrs.evolve(growing, text="**Hello**, world. `a-b`")
        assert await run.send(formatted) == Sent(mid)
        assert tg.shown(forum) == ["Hello, world. a-b"]  # as the user sees it
        plain = attrs.evolve(growing, text="Hello, *world* (a-b).", plain=True)
        assert await run.send(plain) == Sent(mid)
        assert tg.shown(forum) == ["Hello, *world* (a-b)."]
    assert len(tg.sent) == 1 and tg.refused == []  # one message, edited twice
    one, two = tg.edits
    assert (one["message_id"], one["chat_id"], one["parse_mode"]) == (int(mid), forum, "MarkdownV2")
    assert one["text"] == "*Hello*, world\\. `a-b`"
    assert (two["text"], two["parse_mode"]) == ("Hello, *world* (a-b).", None)
    for params in edit_calls(tg):  # an edit keeps its place: no topic, no reply
        assert params.keys() == {"chat_id", "message_id", "text"} | (
            {"parse_mode"} if params.get("parse_mode") else set()
        )
    assert tg.message_now(int(mid))["edit_date"]


@pytest.mark.timeout(30)
async def test_an_edit_to_what_the_message_shows_already_is_sent(tg):
    async with adapter_on(tg, Admissions()) as run:
        growing = await first(run, "Hello")
        again = attrs.evolve(growing, text="Hello")
        assert await run.send(again) == Sent(growing.edit_of)  # Telegram: not modified
        assert await run.send(attrs.evolve(again, text="Hello, world")) == Sent(growing.edit_of)
        assert await run.send(attrs.evolve(again, text="Hello, world")) == Sent(growing.edit_of)
    [refused, refused_too] = [e for e in tg.errors if e["method"] == "editMessageText"]
    assert refused["description"] == refused_too["description"] == NOT_MODIFIED
    assert [e["text"] for e in tg.edits] == ["Hello, world"]
    assert tg.shown(ANN) == ["Hello, world"]


@pytest.mark.timeout(30)
async def test_an_edit_of_a_message_gone_is_permanent_missing(tg):
    async with adapter_on(tg, Admissions()) as run:
        deleted = await first(run, "soon gone")
        tg.delete_message(int(deleted.edit_of))  # the user deleted it
        gone = await run.send(attrs.evolve(deleted, text="soon gone, and more"))
        unknown = await run.send(attrs.evolve(deleted, text="x", edit_of="999999"))
        users = str(tg.update(tg.message("mine"))["message"]["message_id"])
        not_ours = await run.send(attrs.evolve(deleted, text="x", edit_of=users))
        assert isinstance(await run.send(SendRequest(DM, "still here", "after")), Sent)
    for result, said in ((gone, EDIT_NOT_FOUND), (unknown, EDIT_NOT_FOUND),
                         (not_ours, CANT_EDIT)):  # fmt: skip
        assert result == Permanent(f"400 {said}", missing=True), result
    assert tg.edits == [] and tg.shown(ANN) == ["still here"]


@pytest.mark.timeout(30)
async def test_an_edit_in_a_group_that_became_a_supergroup_is_missing_and_remembered(tg):
    group, supergroup = -4001, -1001000000099
    async with adapter_on(tg, Admissions()) as run:
        growing = await first(run, "Hel", Target("telegram", str(group)))
        tg.migrate(group, supergroup)
        moved = await run.send(attrs.evolve(growing, text="Hello"))
        assert isinstance(moved, Permanent) and moved.missing and not moved.formatting
        anew = await run.send(attrs.evolve(growing, text="Hello", edit_of=None))
        assert isinstance(anew, Sent)  # the answer anew: in the supergroup, at once
    assert tg.shown(group) == ["Hel"] and tg.shown(supergroup) == ["Hello"]
    # never tried in the supergroup: the same id there is another message, or none
    assert [params["chat_id"] for params in edit_calls(tg)] == [group]
    assert [c["params"]["chat_id"] for c in tg.calls if c["method"] == "sendMessage"] == [
        group, supergroup,
    ]  # fmt: skip


@pytest.mark.timeout(30)
async def test_a_429_on_an_edit_is_its_retry_after_and_a_5xx_a_passing_fault(tg):
    async with adapter_on(tg, Admissions()) as run:
        growing = await first(run, "Hel")
        tg.fail("editMessageText", 429, retry_after=7)
        limited = await run.send(attrs.evolve(growing, text="Hello"))
        assert limited == RetryAfter(7.0, "429 Too Many Requests: retry after 7")
        assert not limited.scope_wide and tg.rate_limited == 1
        tg.fail("editMessageText", 502)
        assert await run.send(attrs.evolve(growing, text="Hello")) == RetryAfter(
            None, "502 Bad Gateway"
        )
        tg.fail("editMessageText", 400, "can't parse entities: Character '-' is reserved")
        refused = await run.send(attrs.evolve(growing, text="Hello"))
        assert isinstance(refused, Permanent) and refused.formatting and not refused.missing
        assert await run.send(attrs.evolve(growing, text="Hello")) == Sent(growing.edit_of)
    assert tg.shown(ANN) == ["Hello"] and len(tg.edits) == 1


@pytest.mark.timeout(30)
async def test_buttons_survive_an_edit_and_a_press_after_it_is_admitted(tg):
    events = Admissions()
    async with adapter_on(tg, events) as run:
        prompt = await first(run, "Run `sudo ls`?", buttons=PROMPT)
        mid = int(prompt.edit_of)
        assert await run.send(attrs.evolve(prompt, text="Run `sudo ls`? (waiting)")) == Sent(
            prompt.edit_of
        )
        now = tg.message_now(mid)
        assert now["text"] == "Run sudo ls? (waiting)" and now["reply_markup"] == KEYBOARD
        plain = attrs.evolve(prompt, text="Run `sudo ls`? (plain)", plain=True)
        assert await run.send(plain) == Sent(prompt.edit_of)  # the plain resend keeps them
        assert tg.message_now(mid)["reply_markup"] == KEYBOARD
        pressed = tg.press(mid, PROMPT[0].command)
        query_id = tg.update(pressed)["callback_query"]["id"]
        await events.wait_for(f"cb-{query_id}")
        await in_thread(tg.wait_answered, 1)
        done = attrs.evolve(prompt, text="Approved.", buttons=())
        assert await run.send(done) == Sent(prompt.edit_of)
    assert "reply_markup" not in tg.message_now(mid)  # an edit without buttons drops them
    assert [e["reply_markup"] for e in tg.edits] == [KEYBOARD, KEYBOARD, None]
