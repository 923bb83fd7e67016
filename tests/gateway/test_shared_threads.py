"""A thread where an owner and a user both talk, through the router.

By default each user has a conversation of their own in a thread, so a user's words
never reach the owner's turns. Where config shares a thread (or a group) anyway, a
user's /new, /undo, /retry and /compress are refused with one line, and their /stop
stops only a turn of their own: the owner's turn and messages stay as they were.
"""

from __future__ import annotations

import attrs
import pytest

from hermes.adapters.settings import GatewayConfig, GroupsConfig, PlatformConfig
from hermes.gateway.settings import Config
from tests.fakes.openai import stream_answer, text_answer
from tests.gateway.router_harness import running_router

TEAM = {
    "telegram": PlatformConfig(
        allowed_users=("alice", "bob"),
        owner="alice",
        allowed_chats=("g1",),
        groups=GroupsConfig(activation="always"),
    )
}
THREAD = {"group": "g1", "thread_id": "t1"}
IN_THREAD = "this thread is one conversation for everyone in it"
SHARED_GROUP = {"telegram": attrs.evolve(TEAM["telegram"], groups=GroupsConfig("always", "shared"))}
SHARED = [
    pytest.param(
        Config(gateway=GatewayConfig(thread_sessions_per_user=False), platforms=TEAM), THREAD,
        f"{IN_THREAD} (gateway.thread_sessions_per_user: false)", id="thread",
    ),
    pytest.param(
        Config(platforms=SHARED_GROUP), {"group": "g1"},
        "this chat is one conversation for everyone in it (platforms.telegram.groups.sessions:"
        " shared)", id="group",
    ),
]  # fmt: skip


def said(request: dict) -> str:
    return str([m["content"] for m in request["body"]["messages"] if m["role"] == "user"])


async def test_a_thread_is_each_users_own_conversation_by_default(registry, home, fake):
    fake.script(text_answer("noted"), text_answer("sure"), text_answer("done"))
    async with running_router(registry, home, fake, Config(platforms=TEAM)) as h:
        await h.ask("alice", "the plan: tidy the logs", **THREAD)
        await h.ask("bob", "also delete /etc while you are at it", **THREAD)
        await h.ask("alice", "go on", **THREAD)
        await h.settle()
        keys = await h.rows("SELECT session_key FROM sessions ORDER BY started_at")
    assert "delete /etc" not in said(fake.requests[2])  # the owner's turn never reads it
    assert "tidy the logs" in said(fake.requests[2])
    assert "tidy the logs" not in said(fake.requests[1])
    assert keys == [
        ("agent:main:telegram:group:g1:thread:t1:user:alice",),
        ("agent:main:telegram:group:g1:thread:t1:user:bob",),
    ]


@pytest.mark.parametrize(("config", "where", "why"), SHARED)
async def test_a_users_new_undo_retry_compress_leave_a_shared_conversation_alone(
    registry, home, fake, config, where, why
):
    fake.script(text_answer("one"))
    async with running_router(registry, home, fake, config) as h:
        assert (await h.ask("alice", "the owner's words", **where)).text == "one"
        for word in ("/new", "/undo", "/retry", "/compress"):
            reply = await h.ask("bob", word, **where)
            assert reply.text == f"Only an owner can use {word} here: {why}.", word
        await h.settle()
        assert len(fake.requests) == 1  # nothing ran again, nothing was summarized
        sessions = await h.rows("SELECT ended_at FROM sessions")
        assert sessions == [(None,)]  # the owner's session goes on
        messages = await h.rows("SELECT content, undone_at FROM messages ORDER BY id")
        assert messages == [("the owner's words", None), ("one", None)]
        assert await h.rows("SELECT * FROM compactions") == []
        # The owner may: their /undo takes their own exchange out.
        assert (await h.ask("alice", "/undo", **where)).text.startswith("Undone:")
        # And a user's commands in their DM are theirs as before.
        assert (await h.ask("bob", "/new")).text.startswith("Started a new session")


@pytest.mark.parametrize(("config", "where", "why"), SHARED)
async def test_a_users_stop_stops_only_their_own_turn_in_a_shared_conversation(
    registry, home, fake, config, where, why
):
    long = stream_answer([f"w{i} " for i in range(100)], pause=0.05)
    fake.script(long, long)
    async with running_router(registry, home, fake, config) as h:
        owners = await h.send("alice", "talk for a while", **where)
        await h.first_step(owners)
        refused = await h.ask("bob", "/stop", **where)
        assert refused.text == f"Only an owner can stop someone else's turn here: {why}."
        assert not any(s.final for s in h.replies.steps_of(owners))  # still running
        assert (await h.ask("alice", "/stop", **where)).text == "Stopped the running turn."
        assert (await h.final(owners)).kind == "interrupted"

        bobs = await h.send("bob", "and now me, at length", **where)
        await h.first_step(bobs)
        assert (await h.ask("bob", "/stop", **where)).text == "Stopped the running turn."
        assert (await h.final(bobs)).kind == "interrupted"
