"""Session, message and search operations against a real state.db."""

from __future__ import annotations

import time

import pytest

from hermes.state.db import Db
from hermes.state.errors import SearchQueryError, SessionNotFound
from hermes.state.messages import (
    SHOWN,
    SHOWN_WHY,
    NewMessage,
    append_message,
    append_messages,
    latest_message_row_id,
    messages_of,
    undo_last,
)
from hermes.state.search import search_messages
from hermes.state.sessions import (
    NewSession,
    create_session,
    end_session,
    ensure_session,
    get_session,
    set_title,
)


@pytest.fixture
async def db(registry, db_path):
    async with Db(registry, db_path) as gen:
        yield gen


async def test_ensure_session_never_overwrites_routing(db):
    await db.write(
        ensure_session,
        NewSession("s", source="telegram", chat_id="42", user_id="u1", started_at=time.time()),
    )
    row = await db.write(
        ensure_session,
        NewSession(
            "s",
            source="slack",
            chat_id="99",
            user_id="u2",
            thread_id="t",
            model="m",
            started_at=time.time(),
        ),
    )
    assert (row.source, row.chat_id, row.user_id) == ("telegram", "42", "u1")
    assert row.thread_id == "t"  # was empty: filled in
    assert row.model == "m"


async def test_end_session_first_reason_wins(db):
    await db.write(create_session, NewSession("s", started_at=time.time()))
    first = await db.write(end_session, "s", "user_reset", 100.0)
    second = await db.write(end_session, "s", "idle", 200.0)
    assert (first.end_reason, first.ended_at) == ("user_reset", 100.0)
    assert (second.end_reason, second.ended_at) == ("user_reset", 100.0)
    with pytest.raises(SessionNotFound):
        await db.write(end_session, "nope", "x", 300.0)


async def test_title_authority(db):
    await db.write(create_session, NewSession("s", started_at=time.time()))
    assert await db.write(set_title, "s", "from first message", "derived")
    assert await db.write(set_title, "s", "from the model", "llm")  # raises authority
    assert not await db.write(set_title, "s", "derived again", "derived")
    assert not await db.write(set_title, "s", "model again", "llm")  # same: not raised
    assert await db.write(set_title, "s", "My trip", "user")
    assert not await db.write(set_title, "s", "model late", "llm")
    assert await db.write(set_title, "s", "Our trip", "user")  # the user may always
    row = await db.read(get_session, "s")
    assert (row.title, row.title_source) == ("Our trip", "user")


async def test_messages_in_order_with_counters_and_latest_by_role(db):
    await db.write(create_session, NewSession("s", started_at=time.time()))
    ids = await db.write(
        append_messages,
        [
            NewMessage("s", "user", "hi", timestamp=time.time()),
            NewMessage(
                "s",
                "assistant",
                None,
                tool_calls=[{"id": "c1"}, {"id": "c2"}],
                timestamp=time.time(),
            ),
            NewMessage(
                "s",
                "tool",
                "output",
                tool_call_id="c1",
                tool_name="terminal",
                timestamp=time.time(),
            ),
            NewMessage("s", "assistant", "done", timestamp=time.time()),
        ],
    )
    last_user = await db.write(
        append_message, NewMessage("s", "user", "again", timestamp=time.time())
    )
    await db.write(append_message, NewMessage("s", "assistant", "ok", timestamp=time.time()))
    assert ids == sorted(ids)
    rows = await db.read(messages_of, "s")
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert await db.read(latest_message_row_id, "s", "user") == last_user
    assert await db.read(latest_message_row_id, "s") == rows[-1].id
    assert await db.read(latest_message_row_id, "s", "system") is None
    session = await db.read(get_session, "s")
    assert (session.message_count, session.tool_call_count) == (6, 2)
    assert session.last_activity_at is not None
    with pytest.raises(SessionNotFound):
        await db.write(append_message, NewMessage("ghost", "user", "x", timestamp=time.time()))


async def test_undo_takes_the_users_message_not_the_image_a_tool_showed(db):
    """A screenshot reaches the model as a user-role row (SHOWN): /undo and /retry pass over
    it to the user's own message, and the whole exchange goes."""
    now = time.time()
    await db.write(create_session, NewSession("s", started_at=now))
    await db.write(append_message, NewMessage("s", "user", "hi", timestamp=now))
    await db.write(
        append_messages,
        [
            NewMessage("s", "user", "look at the page", timestamp=now, untrusted="a page"),
            NewMessage("s", "assistant", None, tool_calls=[{"id": "c1"}], timestamp=now),
            NewMessage(
                "s", "tool", "{}", tool_call_id="c1", tool_name="browser_screenshot", timestamp=now
            ),  # fmt: skip
            NewMessage(
                "s", "user", SHOWN, timestamp=now, untrusted=SHOWN_WHY, attachments='{"files": []}'
            ),  # fmt: skip
            NewMessage("s", "assistant", "I see it.", timestamp=now),
        ],
    )
    undone = await db.write(undo_last, "s", now)
    assert (undone.text, undone.untrusted) == ("look at the page", "a page")
    kept = [r.content for r in await db.read(messages_of, "s") if r.undone_at is None]
    assert kept == ["hi"]


async def test_search_ranks_snippets_and_skips_tool_rows(db):
    await db.write(create_session, NewSession("s", started_at=time.time()))
    await db.write(
        append_messages,
        [
            NewMessage("s", "user", "the weather in Lisbon is sunny", timestamp=time.time()),
            NewMessage(
                "s", "assistant", "Lisbon Lisbon Lisbon: a trip to Lisbon", timestamp=time.time()
            ),
            NewMessage("s", "tool", "curl output mentioning Lisbon", timestamp=time.time()),
            NewMessage("s", "user", "nothing to see", timestamp=time.time()),
        ],
    )
    hits = await db.read(search_messages, "lisbon")
    assert [h.role for h in hits] == ["assistant", "user"]  # most mentions ranks first
    assert hits[0].rank <= hits[1].rank
    assert "[Lisbon]" in hits[0].snippet
    with_tool = await db.read(search_messages, "lisbon", 20, True)
    assert {h.role for h in with_tool} == {"assistant", "user", "tool"}
    assert await db.read(search_messages, "madrid") == []


@pytest.mark.parametrize("query", ['"unbalanced', "AND", "a" * 501, "   "])
async def test_bad_search_query_is_a_typed_error(db, query):
    with pytest.raises(SearchQueryError):
        await db.read(search_messages, query)
