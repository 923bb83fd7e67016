"""The router, driven the way adapters drive it: events admitted into the journal and
cast to it, answers and turn steps recorded by a stand-in for the delivery side.

Who may talk to the agent, DM pairing, sessions by key, the router's commands,
busy modes and the session actors' life, the drain notice, duplicates, and a turn
cut by a drain resumed by the next router. Pure functions (decide, session_key,
the pairing store) have their own tests; these go through the Router.

Pairing codes expire and lock on the wall clock (`time.time()`, which the router
passes to the pairing functions), not on Trio's clock: a mock clock cannot age
them, so the expiry test ages the stored request instead.
"""

from __future__ import annotations

import logging
import re
import time

import attrs
import pytest
import trio
import trio.testing
from prometheus_client import REGISTRY

from hermes.adapters.contract import StepKind, Target
from hermes.adapters.settings import GatewayConfig, GroupsConfig, PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.tools.catalog import default_tools
from hermes.gateway import housekeeping
from hermes.gateway.admission import Admitted
from hermes.gateway.command_table import HELP
from hermes.gateway.intake import DRAIN_NOTICE
from hermes.gateway.journal import new_owner
from hermes.gateway.session_actor import IDLE_TIMEOUT, QUEUE_MAX, Turn
from hermes.gateway.settings import Config
from hermes.gateway.turn_follower import CUT_NOTICE, RESUMED_PREFIX
from hermes.state.db import Db
from hermes.state.pairing import (
    ALPHABET,
    Approved,
    Refusal,
    attempt_approval,
    revoke,
)
from tests.fakes.openai import (
    FakeOpenAI,
    error_answer,
    stream_answer,
    text_answer,
    tool_answer,
)
from tests.gateway.router_harness import running_router

CODE = re.compile(r"pairing code is ([A-Z0-9]+)\.")


def long_stream(pieces: int = 100, pause: float = 0.05):
    """An answer that streams for pieces * pause real seconds (tests stop it early)."""
    return stream_answer([f"w{i} " for i in range(pieces)], pause=pause)


def user_texts(fake) -> list[str]:
    """The last user message of every request the model got."""
    out = []
    for request in fake.requests:
        users = [m for m in request["body"]["messages"] if m["role"] == "user"]
        out.append(users[-1]["content"] if users else "")
    return out


# -- who may talk to the agent ---------------------------------------------------------

AUTH = Config(
    gateway=GatewayConfig(allowed_users=("telegram:gus", "slack:gus")),
    platforms={
        "telegram": PlatformConfig(allowed_users=("alice",), allowed_chats=("g-ok",)),
        "discord": PlatformConfig(allow_all_users=True),
        "slack": PlatformConfig(
            allowed_users=("alice",),
            allowed_chats=("g-loose",),
            groups=GroupsConfig(activation="always"),
        ),
        "matrix": PlatformConfig(enabled=False, allow_all_users=True),
    },
)

# (what the message is, its fields): each answered by the agent ...
ANSWERED = [
    ("a DM from an allowlisted user", dict(user="alice")),
    ("a DM on a platform with allow_all_users", dict(user="zoe", platform="discord")),
    ("an allowed group, mentioned, authorized", dict(user="alice", group="g-ok", mentioned=True)),
    ("activation always", dict(user="alice", platform="slack", group="g-loose")),
    ("gateway.allowed_users on telegram", dict(user="gus")),
    ("gateway.allowed_users on slack", dict(user="gus", platform="slack")),
    ("gateway.allowed_users in a group", dict(user="gus", group="g-ok", mentioned=True)),
]
# ... or refused in silence: no answer, no pairing code, no model call
SILENT = [
    ("a stranger's DM, allowlist set", dict(user="mallory")),
    ("a group not in allowed_chats", dict(user="alice", group="g-other", mentioned=True)),
    ("an allowed group, not mentioned", dict(user="alice", group="g-ok")),
    ("a stranger in an allowed group", dict(user="mallory", group="g-ok", mentioned=True)),
    ("a stranger, activation always", dict(user="mallory", platform="slack", group="g-loose")),
    ("a bot", dict(user="alice", is_bot=True)),
    ("a bot on allow_all_users", dict(user="zoe", platform="discord", is_bot=True)),
    ("a disabled platform", dict(user="alice", platform="matrix")),
    ("a platform not configured", dict(user="alice", platform="irc")),
]


async def test_authorized_messages_reach_the_agent_and_are_answered(registry, home, fake):
    async with running_router(registry, home, fake, AUTH) as h:
        for n, (case, fields) in enumerate(ANSWERED):
            fake.script(text_answer(f"answer {n}"))
            event = await h.send(text=f"question {n}", **fields)
            answer = await h.answer_to(event)
            assert (answer.text, answer.target, answer.source) == (
                f"answer {n}",
                event.target(),
                event,
            ), case
            assert (await h.final(event)).kind == "done", case
            assert user_texts(fake)[-1] == f"question {n}", case
            assert await h.journal(event) == "answered", case
        assert len(fake.requests) == len(ANSWERED)


async def test_refused_messages_get_nothing_at_all(registry, home, fake):
    async with running_router(registry, home, fake, AUTH) as h:
        for case, fields in SILENT:
            event = await h.send(text="let me in", **fields)
            step = await h.final(event)
            assert (step.kind, step.text, step.session_id) == ("refused", "", None), case
            assert await h.journal(event) == "refused", case
        assert h.replies.answers == []
        assert fake.requests == []
        assert await h.rows("SELECT * FROM pairing_requests") == []
        assert await h.rows("SELECT * FROM sessions") == []


async def test_each_refusal_is_logged_once_with_its_reason(registry, home, fake, caplog):
    caplog.set_level(logging.INFO, logger="hermes.gateway.gate")
    async with running_router(registry, home, fake, AUTH) as h:
        for _ in range(2):
            await h.final(await h.send("mallory", "hi"))
        await h.final(await h.send("mallory", "hi", group="g-other", mentioned=True))
        await h.final(await h.send("alice", "hi", group="g-ok"))
        await h.final(await h.send("alice", "hi", group="g-ok"))
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert refusals == [
        "refused telegram user mallory in dm dm-mallory: unknown user (allowlist configured)",
        "refused telegram user mallory in group g-other: group not in allowed_chats",
        "refused telegram user alice in group g-ok: not addressed to the bot"
        " (groups.activation: mention)",
    ]


# -- DM pairing ----------------------------------------------------------------------

OPEN = Config(platforms={"telegram": PlatformConfig()})  # no allowlist: strangers may pair


async def test_a_stranger_gets_one_code_and_at_most_three_are_pending(registry, home, fake):
    async with running_router(registry, home, fake, OPEN) as h:
        first = await h.send("s1", "hello?")
        offer = await h.answer_to(first)
        assert offer.target == Target("telegram", "dm-s1")
        (code,) = CODE.findall(offer.text)
        assert len(code) == 8 and set(code) <= set(ALPHABET) and not set(code) & set("0O1I")
        assert f"hermes pairing approve telegram {code}" in offer.text
        assert (await h.final(first)).kind == "refused"
        assert await h.journal(first) == "refused"

        again = await h.send("s1", "hello??")  # within the hour: nothing more is sent
        assert (await h.final(again)).kind == "refused" and h.replies.answers_to(again) == []
        assert await h.rows("SELECT user_id, chat_id FROM pairing_requests") == [("s1", "dm-s1")]

        for user in ("s2", "s3", "s4"):  # the fourth takes the oldest's slot
            assert CODE.search((await h.ask(user, "hi")).text)
        pending = await h.rows("SELECT user_id FROM pairing_requests ORDER BY user_id")
        assert pending == [("s2",), ("s3",), ("s4",)]
        assert fake.requests == []


async def test_an_approved_user_is_answered_at_once_welcomed_and_revocable(
    registry, home, fake, io_clock
):
    fake.script(text_answer("nice to meet you"))
    async with running_router(registry, home, fake, OPEN, timeout=1e6) as h:
        (code,) = CODE.findall((await h.ask("sam", "hello?")).text)
        approved = h.cli_write(attempt_approval, "telegram", code, time.time(), "cli", True)
        assert isinstance(approved, Approved) and approved.owner  # approved as an owner

        asked = await h.send("sam", "now?")
        assert (await h.answer_to(asked)).text == "nice to meet you"  # no restart needed
        welcome = await h.answer_with_key("welcome:telegram:sam")  # housekeeping's poll
        assert welcome.target == Target("telegram", "dm-sam") and welcome.source is None
        assert welcome.text.startswith("You are approved") and "owner" in welcome.text
        assert "role: owner" in (await h.ask("sam", "/whoami")).text

        await trio.sleep(housekeeping.HOUSEKEEPING * 3)  # more polls: told once only
        keys = [a.key for a in h.replies.answers]
        assert len([k for k in keys if k.startswith("welcome:telegram:sam:")]) == 1
        (notified,) = await h.rows("SELECT notified_at FROM pairing_approved")
        assert notified[0] is not None

        assert h.cli_write(revoke, "telegram", "sam")
        refused = await h.send("sam", "still there?")
        assert (await h.final(refused)).kind == "refused"
        assert CODE.search((await h.answer_to(refused)).text)  # a stranger again
        assert user_texts(fake) == ["now?"]


async def test_an_owner_approved_outside_serve_has_the_role_from_the_next_round(
    registry, home, fake, io_clock
):
    """The router keeps the pairing owners it read until its next housekeeping round,
    which is also the round that welcomes an approval made outside serve."""
    config = attrs.evolve(OPEN, gateway=GatewayConfig(allowed_users=("telegram:alice",)))
    async with running_router(registry, home, fake, config, timeout=1e6) as h:
        assert "role: user" in (await h.ask("alice", "/whoami")).text  # no owner by pairing
        (code,) = CODE.findall((await h.ask("sam", "hello?")).text)
        assert h.cli_write(attempt_approval, "telegram", code, time.time(), "cli", True).owner
        await h.answer_with_key("welcome:telegram:sam")
        assert "role: owner" in (await h.ask("sam", "/whoami")).text


async def test_an_expired_code_is_replaced_and_a_locked_platform_approves_nobody(
    registry, home, fake
):
    async with running_router(registry, home, fake, OPEN) as h:
        (old,) = CODE.findall((await h.ask("sam", "hi")).text)

        def expire(conn):
            conn.execute("UPDATE pairing_requests SET expires_at = created_at - 1")
            conn.execute("UPDATE pairing_replies SET replied_at = replied_at - 3600")

        h.cli_write(expire)  # an hour on the wall clock, which the router reads
        (new,) = CODE.findall((await h.ask("sam", "hi again")).text)
        assert new != old
        refused = h.cli_write(attempt_approval, "telegram", old, time.time())
        assert isinstance(refused, Refusal) and refused.locked_until is None

        for _ in range(4):  # with the one above: five failures within the hour
            wrong = h.cli_write(attempt_approval, "telegram", "WRONGONE", time.time())
            assert isinstance(wrong, Refusal) and wrong.locked_until is None
        locked = h.cli_write(attempt_approval, "telegram", new, time.time())
        assert isinstance(locked, Refusal) and locked.locked_until is not None
        quiet = await h.send("sam", "am I in?")  # one code an hour: silence
        assert (await h.final(quiet)).kind == "refused" and h.replies.answers_to(quiet) == []
        assert fake.requests == []


# -- sessions by key -----------------------------------------------------------------

TEAM = Config(
    platforms={
        "telegram": PlatformConfig(
            allowed_users=("alice", "bob"),
            allowed_chats=("g1",),
            groups=GroupsConfig(activation="always"),
        )
    }
)


async def test_sessions_by_key_through_the_router(registry, home, fake):
    async with running_router(registry, home, fake, TEAM) as h:
        a = await h.final(await h.send("alice", "one", group="g1"))
        b = await h.final(await h.send("bob", "two", group="g1"))
        assert a.session_id != b.session_id  # per user in a group
        a2 = await h.final(await h.send("alice", "three", group="g1"))
        assert a2.session_id == a.session_id

        t1 = await h.final(await h.send("alice", "four", group="g1", thread_id="t1"))
        t2 = await h.final(await h.send("bob", "five", group="g1", thread_id="t1"))
        assert t1.session_id != t2.session_id != a.session_id  # per user in a thread too

        d1 = await h.final(await h.send("alice", "six"))
        d2 = await h.final(await h.send("alice", "seven"))
        assert d1.session_id == d2.session_id not in (a.session_id, t1.session_id)
        await h.settle()

        rows = await h.rows(
            "SELECT id, source, session_key, chat_id, chat_type, thread_id, user_id, user_name,"
            " message_count FROM sessions ORDER BY started_at"
        )
    assert rows == [
        (a.session_id, "telegram", "agent:main:telegram:group:g1:user:alice", "g1", "group", None,
         "alice", "Alice", 4),
        (b.session_id, "telegram", "agent:main:telegram:group:g1:user:bob", "g1", "group", None,
         "bob", "Bob", 2),
        (t1.session_id, "telegram", "agent:main:telegram:group:g1:thread:t1:user:alice", "g1",
         "group", "t1", "alice", "Alice", 2),
        (t2.session_id, "telegram", "agent:main:telegram:group:g1:thread:t1:user:bob", "g1",
         "group", "t1", "bob", "Bob", 2),
        (d1.session_id, "telegram", "agent:main:telegram:dm:dm-alice", "dm-alice", "dm", None,
         "alice", "Alice", 4),
    ]  # fmt: skip
    assert all(s.startswith("telegram_") for s in (a.session_id, t1.session_id, d1.session_id))


async def test_a_shared_group_session_and_a_session_kept_across_routers(registry, home, fake):
    shared = attrs.evolve(TEAM.platforms["telegram"], groups=GroupsConfig("always", "shared"))
    config = Config(platforms={"telegram": shared})
    async with running_router(registry, home, fake, config) as h:
        a = await h.final(await h.send("alice", "one", group="g1"))
        b = await h.final(await h.send("bob", "two", group="g1"))
        dm = await h.final(await h.send("alice", "three"))
        assert a.session_id == b.session_id
    async with running_router(registry, home, fake, config) as h:  # a restart
        again = await h.final(await h.send("alice", "four"))
        assert again.session_id == dm.session_id
        assert (await h.final(await h.send("bob", "five", group="g1"))).session_id == a.session_id


# -- commands ----------------------------------------------------------------------------

CMD = Config(platforms={"telegram": PlatformConfig(allowed_users=("alice", "bob"), owner="alice")})


async def test_model_switches_this_session_only_and_survives_a_restart(registry, home, fake):
    fake.default = text_answer("from the first")
    with FakeOpenAI() as second:
        second.default = text_answer("from the second")

        def two() -> Agent:
            providers = [OpenAICompatible("f", "m", fake.url, "k"),
                         OpenAICompatible("g", "m2", second.url, "k")]  # fmt: skip
            return Agent(ProviderChain(providers), default_tools())

        async with running_router(registry, home, fake, CMD, agent=two()) as h:
            assert (await h.ask("alice", "/model")).text == "model: f/m (then g/m2)"
            assert (await h.ask("alice", "/model g")).text == "model: g/m2 (then f/m)"
            assert (await h.ask("alice", "hi")).text == "from the second"
            assert (await h.ask("bob", "hi")).text == "from the first"  # his own session
            assert (await h.ask("bob", "/model g")).text == "Only an owner can switch the model."
            refused = (await h.ask("alice", "/model gpt")).text
            assert refused == "gpt is not one of the configured models: f/m, g/m2"
        async with running_router(registry, home, fake, CMD, agent=two()) as h:  # a restart
            assert (await h.ask("alice", "again")).text == "from the second"
            assert (await h.ask("alice", "/model default")).text == "model: f/m (then g/m2)"
            assert (await h.ask("alice", "back")).text == "from the first"
        assert user_texts(second) == ["hi", "again"]


def said(request: dict) -> list[tuple[str, str]]:
    """The user and assistant messages of a model request, in order."""
    return [(m["role"], m["content"]) for m in request["body"]["messages"]
            if m["role"] in ("user", "assistant")]  # fmt: skip


async def test_undo_and_retry_change_what_the_model_sees_and_the_transcript_keeps_it(
    registry, home, fake
):
    fake.script(text_answer("one"), text_answer("two"), text_answer("two again"),
                text_answer("three"), text_answer("after a restart"))  # fmt: skip
    async with running_router(registry, home, fake, CMD) as h:
        assert (await h.ask("alice", "first")).text == "one"
        assert (await h.ask("alice", "second")).text == "two"
        assert (await h.ask("alice", "/retry")).text == "two again"
        assert said(fake.requests[-1]) == [("user", "first"), ("assistant", "one"),
                                           ("user", "second")]  # fmt: skip
        undone = (await h.ask("alice", "/undo")).text
        assert undone.startswith("Undone: 'second' and its answer are out of the conversation")
        assert (await h.ask("alice", "third")).text == "three"
        assert said(fake.requests[-1])[-2:] == [("assistant", "one"), ("user", "third")]
        marked = await h.rows("SELECT content FROM messages WHERE undone_at IS NOT NULL"
                              " ORDER BY id")  # fmt: skip
        assert [m for (m,) in marked] == ["second", "two", "second", "two again"]
        assert (await h.ask("bob", "/undo")).text.startswith("Nothing to undo")
    async with running_router(registry, home, fake, CMD) as h:  # read again from state.db
        assert (await h.ask("alice", "and now?")).text == "after a restart"
        assert [u for u, _ in said(fake.requests[-1])].count("user") == 3  # first, third, now
        assert "second" not in str(said(fake.requests[-1]))


async def test_help_model_whoami_and_unknown_words(registry, home, fake):
    fake.script(text_answer("no idea"))
    async with running_router(registry, home, fake, CMD) as h:
        help_event = await h.send("alice", "/help")
        assert (await h.answer_to(help_event)).text == HELP
        step = await h.final(help_event)
        assert step.kind == "done" and step.session_id.startswith("telegram_")
        assert (await h.ask("alice", "/model")).text == "model: f/m"
        skills_and_files = ("skills_list, skill_view, skill_manage, read_file, write_file,"
                            " patch, search_files, todo, clarify")  # fmt: skip
        assert (await h.ask("alice", "/whoami")).text == (
            "telegram user alice (Alice) · authorized · role: owner · tools: terminal, process,"
            " memory, cronjob, session_search, send_message, send_file, skills_list, skill_view,"
            " skill_manage, read_file, write_file, patch, search_files, todo, delegate_task,"
            " clarify · commands run on: host"
        )
        assert (await h.ask("bob", "/WhoAmI")).text.endswith(
            f"role: user · tools: memory, session_search, send_message, send_file,"
            f" {skills_and_files}"
        )
        assert fake.requests == []  # answered without the agent
        assert await h.journal(help_event) == "answered"

        assert (await h.ask("alice", "/frobnicate the widgets")).text == "no idea"
        assert user_texts(fake) == ["/frobnicate the widgets"]


async def test_sethome_is_for_owners(registry, home, fake):
    async with running_router(registry, home, fake, CMD) as h:
        assert (await h.ask("bob", "/sethome")).text == "Only an owner can set the home channel."
        assert await h.rows("SELECT * FROM home_channels") == []
        assert "now the home channel of telegram" in (await h.ask("alice", "/sethome")).text
        rows = await h.rows("SELECT platform, chat_id, thread_id, set_by FROM home_channels")
        assert rows == [("telegram", "dm-alice", None, "alice")]


@pytest.mark.parametrize("word", ["/new", "/new@hermes_bot", "/NEW"])
async def test_new_starts_a_new_session_and_ends_the_old(registry, home, fake, word):
    fake.script(text_answer("one"), text_answer("two"))
    async with running_router(registry, home, fake, CMD) as h:
        old = (await h.final(await h.send("alice", "first"))).session_id
        new_event = await h.send("alice", word)
        reply = await h.answer_to(new_event)
        step = await h.final(new_event)
        assert step.session_id != old and f"({step.session_id})" in reply.text
        # written at once as the key's live session: a restart or a mirror finds it
        written = await h.rows("SELECT id FROM sessions WHERE ended_at IS NULL")
        assert written == [(step.session_id,)]
        after = await h.final(await h.send("alice", "second"))
        assert after.session_id == step.session_id
        await h.settle()
        ended = await h.rows("SELECT ended_at, end_reason FROM sessions WHERE id = ?", old)
        assert ended[0][0] is not None and ended[0][1] == "new session"
        live = await h.rows("SELECT session_key FROM sessions WHERE ended_at IS NULL")
        assert live == [("agent:main:telegram:dm:dm-alice",)]
        # the new session's prompt does not carry the old one's history
        assert "first" not in str(fake.requests[-1]["body"]["messages"])


async def test_status_and_stop_while_a_turn_streams(registry, home, fake):
    fake.script(long_stream(), text_answer("after"))
    async with running_router(registry, home, fake, CMD) as h:
        idle = await h.ask("alice", "/status")
        assert " · idle · 0 waiting" in idle.text

        talk = await h.send("alice", "talk for a while")
        session = (await h.first_step(talk)).session_id
        status = (await h.ask("alice", "/status")).text
        assert status == f"session {session} · model f/m · running · 0 waiting"

        stop = await h.send("alice", "/stop")
        assert (await h.answer_to(stop)).text == "Stopped the running turn."
        assert (await h.final(talk)).kind == "interrupted"
        assert (await h.ask("alice", "/stop")).text == "Nothing is running."
        assert (await h.ask("alice", "/status")).text.endswith(" · idle · 0 waiting")
        assert h.replies.answers_to(talk) == []  # /stop said it; nothing else is sent
        assert await h.journal(talk) == "answered"
        assert (await h.ask("alice", "go on")).text == "after"


async def test_a_failed_turn_is_answered_with_what_failed(registry, home, fake):
    fake.script(error_answer(400, "the prompt is not acceptable"), text_answer("fine now"))
    async with running_router(registry, home, fake, CMD) as h:
        failed = await h.send("alice", "something odd")
        step = await h.final(failed)
        # one line for the user: the provider's answer stays in the log
        assert step.kind == "error" and step.text == "the model provider answered with an error"
        assert (await h.answer_to(failed)).text == f"Sorry, that failed: {step.text}"
        assert await h.journal(failed) == "answered"
        assert (await h.ask("alice", "again")).text == "fine now"  # the session goes on


# -- busy modes, the queue, the session actors' life -------------------------------------


@pytest.mark.parametrize("mode", ["interrupt", "queue"])
async def test_a_message_mid_turn_interrupts_or_queues(registry, home, fake, mode):
    fake.script(long_stream(30, 0.03), text_answer("second"))
    config = Config(gateway=GatewayConfig(busy=mode), platforms=CMD.platforms)
    async with running_router(registry, home, fake, config) as h:
        first = await h.send("alice", "long one")
        await h.first_step(first)
        second = await h.send("alice", "short one")
        assert (await h.answer_to(second)).text == "second"
        if mode == "interrupt":
            assert (await h.final(first)).kind == "interrupted"
            assert h.replies.answers_to(first) == []
        else:
            done = await h.final(first)
            assert done.kind == "done" and done.text == "".join(f"w{i} " for i in range(30))
            keys = [a.key for a in h.replies.answers]
            assert keys.index(f"telegram:{first.event_id}") < keys.index(
                f"telegram:{second.event_id}"
            )
        assert user_texts(fake) == ["long one", "short one"]


async def test_different_keys_run_concurrently(registry, home, fake):
    fake.script(long_stream())
    fake.answer_when("bob's question", text_answer("bob's answer"))
    async with running_router(registry, home, fake, CMD) as h:
        alice = await h.send("alice", "a long story")
        await h.first_step(alice)
        assert (await h.ask("bob", "bob's question")).text == "bob's answer"
        assert not any(s.final for s in h.replies.steps_of(alice))  # still streaming
        await h.ask("alice", "/stop")
        assert (await h.final(alice)).kind == "interrupted"


async def test_waiting_turns_are_bounded_and_never_left_hanging(registry, home, fake):
    """In queue mode at most QUEUE_MAX turns wait; more are refused at once. /stop ends
    the waiting ones as interrupted: no turn is left without a final step, and the user
    is not sent one "failed" message per queued message."""
    fake.script(long_stream(200, 0.05))
    config = Config(gateway=GatewayConfig(busy="queue"), platforms=CMD.platforms)
    async with running_router(registry, home, fake, config) as h:
        running = await h.send("alice", "long one")
        await h.first_step(running)
        waiting = [await h.send("alice", f"queued {n}") for n in range(QUEUE_MAX)]
        extra = await h.send("alice", "one too many")
        step = await h.final(extra)
        assert step.kind == "error" and "already waiting" in step.text
        assert (await h.answer_to(extra)).text == (
            f"Sorry, that failed: {QUEUE_MAX} messages are already waiting; send it again later"
        )
        assert f"running · {QUEUE_MAX} waiting" in (await h.ask("alice", "/status")).text
        await h.ask("alice", "/stop")
        for event in waiting:
            ended = await h.final(event)
            assert ended.kind == "interrupted" and "/stop" in ended.text
        assert (await h.final(running)).kind == "interrupted"
        assert len(fake.requests) == 1
        await h.settle()
        assert all(h.replies.answers_to(event) == [] for event in waiting)
        states = await h.rows("SELECT DISTINCT state FROM inbound_journal")
        assert states == [("answered",)]


async def test_a_session_actor_stops_after_an_idle_timeout_since_its_last_message(
    registry, home, fake, io_clock, monkeypatch
):
    monkeypatch.setattr(housekeeping, "HOUSEKEEPING", 10 * IDLE_TIMEOUT)  # keep the jumps few
    fake.script(text_answer("a"), text_answer("b"), text_answer("c"))
    async with running_router(registry, home, fake, CMD, timeout=1e6) as h:
        session = (await h.final(await h.send("alice", "one"))).session_id
        await trio.sleep(IDLE_TIMEOUT * 0.75)
        assert (await h.ask("alice", "two")).text == "b"
        await trio.sleep(IDLE_TIMEOUT * 0.75)  # 1.5 timeouts after the first message
        assert session in h.router.host.sessions
        await trio.sleep(IDLE_TIMEOUT * 0.5)  # 1.25 timeouts after the last
        assert session not in h.router.host.sessions
        third = await h.send("alice", "three")
        assert (await h.answer_to(third)).text == "c"  # a new actor, the same session
        assert (await h.final(third)).session_id == session
        history = [m["content"] for m in fake.requests[-1]["body"]["messages"][1:]]
        assert history == ["one", "a", "two", "b", "three"]


async def test_a_turn_left_in_a_crashed_session_actors_mailbox_ends_with_an_error(
    registry, home, fake, caplog
):
    fake.script(text_answer("a"), text_answer("c"))
    async with running_router(registry, home, fake, CMD) as h:
        session = (await h.final(await h.send("alice", "one"))).session_id
        await h.settle()
        address = h.router.host.sessions[session][1]
        send, events = trio.open_memory_channel(10)
        # Both wait in the mailbox, the Turn behind a message the session actor cannot
        # handle, which crashes it.
        address.cast_nowait(object())
        address.cast_nowait(Turn("two", send))
        with trio.fail_after(30):
            async with events:
                got = [e async for e in events]  # ends: the caller is not left waiting
        assert [e.kind for e in got] == [StepKind.ERROR]
        assert "stopped before the turn began" in got[0].text
        await trio.testing.wait_all_tasks_blocked()  # the router has seen the crash
        assert session not in h.router.host.sessions
        assert any("crashed" in r.getMessage() for r in caplog.records)
        third = await h.send("alice", "three")  # a new actor takes the session on
        assert (await h.answer_to(third)).text == "c"
        assert (await h.final(third)).session_id == session


# -- draining, duplicates, restarts ---------------------------------------------------


async def test_after_stop_intake_new_events_get_the_drain_notice(registry, home, fake):
    fake.script(long_stream(20, 0.02))
    async with running_router(registry, home, fake, CMD) as h:
        busy = await h.send("alice", "in flight")
        await h.first_step(busy)
        h.router.stop_intake()
        late = await h.send("bob", "hello?")
        step = await h.final(late)
        assert (step.kind, step.text, step.session_id) == ("refused", DRAIN_NOTICE, None)
        assert (await h.answer_to(late)).text == DRAIN_NOTICE
        assert await h.journal(late) == "refused"
        done = await h.final(busy)  # the turn in flight finishes
        assert done.kind == "done"
        assert (await h.answer_to(busy)).text == done.text
        assert len(fake.requests) == 1


async def test_a_duplicate_event_runs_one_turn(registry, home, fake):
    fake.script(text_answer("once"), text_answer("twice?"))
    async with running_router(registry, home, fake, CMD) as h:
        event = await h.send("alice", "hello")
        assert not await h.admit(event)  # the adapter's retry: recognised at admission
        h.address.cast_nowait(Admitted(event))  # and a second cast: not claimed twice
        assert (await h.answer_to(event)).text == "once"
        await h.settle()
        assert len(fake.requests) == 1
        assert len(h.replies.answers) == 1
        assert len([s for s in h.replies.steps if s.final]) == 1
        assert await h.journal(event) == "answered"


async def test_an_event_admitted_while_the_router_runs_is_claimed_in_that_one_commit(
    registry, home, fake
):
    """Admission writes the row started by the live router, and the router does not
    claim it again; a turn's answer closes it."""
    fake.script(text_answer("one commit"))
    async with running_router(registry, home, fake, CMD) as h:
        event = await h.send("alice", "hello")
        assert (await h.answer_to(event)).text == "one commit"
        await h.settle()
        async with Db(registry, home.state_db) as db:
            row = await db.read(
                lambda conn: conn.execute(
                    "SELECT state, owner, started_at = received_at FROM inbound_journal"
                    " WHERE event_id = ?", (event.event_id,),
                ).fetchone()
            )  # fmt: skip
        assert row == ("answered", h.router.owner, 1)  # started when it was admitted


async def test_the_turn_overhead_histogram_leaves_out_the_models_time(registry, home, fake):
    """Each answered turn that just arrived is observed once, without the model's wait."""

    def sample(part: str) -> float:
        return REGISTRY.get_sample_value(f"hermes_turn_overhead_seconds_{part}") or 0.0

    count, total = sample("count"), sample("sum")
    fake.delay = 0.5
    fake.script(text_answer("thought about it"))
    async with running_router(registry, home, fake, CMD) as h:
        start = trio.current_time()
        assert (await h.ask("alice", "hello")).text == "thought about it"
        took = trio.current_time() - start
        await h.settle()
    assert sample("count") == count + 1
    assert took >= 0.5  # the model's half second ...
    assert sample("sum") - total < took - 0.45  # ... is not hermes's


async def test_a_turn_cut_by_a_drain_is_resumed_by_the_next_router(registry, home, fake):
    fake.script(long_stream(200, 0.05), text_answer("the whole answer"))
    async with running_router(registry, home, fake, CMD) as h:
        cut = await h.send("alice", "a big question")
        await h.first_step(cut)
        h.router.request_drain(trio.current_time() + 0.2)
        assert (await h.final(cut)).kind == "interrupted"
        assert h.replies.answers_to(cut) == []  # left for the next start
    assert (await _journal_row(registry, home, cut))[0] == "started"
    async with running_router(registry, home, fake, CMD, owner=new_owner()) as h:
        answer = await h.answer_to(cut)
        assert answer.text == RESUMED_PREFIX + "the whole answer"
        assert await h.journal(cut) == "answered"
        assert user_texts(fake) == ["a big question", "a big question"]
        users = await h.rows("SELECT count(*) FROM messages WHERE role = 'user'")
        assert users == [(1,)]  # resumed, not recorded twice


async def test_a_turn_running_a_terminal_command_at_the_drain_is_not_resumed(registry, home, fake):
    """It may be what asked for the restart (`systemctl restart hermes`): resuming it
    would ask again. Its user is told to send it again instead."""
    fake.script(tool_answer(("terminal", {"command": "sleep 30"})))
    async with running_router(registry, home, fake, CMD) as h:
        asked = await h.send("alice", "restart yourself")
        await h.first_step(asked, kind="tool_call")
        h.router.request_drain(trio.current_time() + 0.2)
        assert (await h.final(asked)).kind == "interrupted"
        assert (await h.answer_to(asked)).text == CUT_NOTICE
    assert (await _journal_row(registry, home, asked))[0] == "answered"
    async with running_router(registry, home, fake, CMD, owner=new_owner()) as h:
        await h.settle()
        assert h.replies.answers == [] and len(fake.requests) == 1


async def _journal_row(registry, home, event):
    async with Db(registry, home.state_db) as db:
        return await db.read(
            lambda conn: conn.execute(
                "SELECT state, owner FROM inbound_journal WHERE platform = ? AND event_id = ?",
                (event.platform, event.event_id),
            ).fetchone()
        )


# -- defects the first run of these tests found in hermes/, fixed since ------------------


async def test_a_queued_turn_cut_by_a_drain_is_resumed_with_its_question(registry, home, fake):
    queue = Config(gateway=GatewayConfig(busy="queue"), platforms=CMD.platforms)
    fake.script(long_stream(200, 0.05), text_answer("A1"), text_answer("A2"))
    async with running_router(registry, home, fake, queue) as h:
        first = await h.send("alice", "first question")
        await h.first_step(first)
        second = await h.send("alice", "second question")
        assert "1 waiting" in (await h.ask("alice", "/status")).text
        h.router.request_drain(trio.current_time() + 0.2)
        assert (await h.final(second)).kind == "interrupted"
    assert (await _journal_row(registry, home, second))[0] == "started"
    async with running_router(registry, home, fake, queue) as h:
        await h.answer_to(second)
        assert user_texts(fake)[-1] == "second question"


async def test_a_drain_ends_when_the_queued_turns_are_done(registry, home, fake):
    queue = Config(gateway=GatewayConfig(busy="queue"), platforms=CMD.platforms)
    fake.script(long_stream(10, 0.03), text_answer("A2"))
    async with running_router(registry, home, fake, queue) as h:
        first = await h.send("alice", "first question")
        await h.first_step(first)
        second = await h.send("alice", "second question")
        assert "1 waiting" in (await h.ask("alice", "/status")).text
        h.router.request_drain(trio.current_time() + 120)
        assert (await h.answer_to(second)).text == "A2"
        with trio.fail_after(30):  # not the 120 s of the deadline
            await h.stopped.wait()


async def test_turns_with_the_same_event_id_on_two_platforms(registry, home, fake):
    two = Config(
        platforms={
            "telegram": PlatformConfig(allowed_users=("alice",)),
            "discord": PlatformConfig(allowed_users=("alice",)),
        }
    )
    fake.script(long_stream(10, 0.05), text_answer("from discord"))
    async with running_router(registry, home, fake, two) as h:
        on_telegram = attrs.evolve(h.event("alice", "one"), event_id="1001")
        on_discord = attrs.evolve(h.event("alice", "two", platform="discord"), event_id="1001")
        assert await h.admit(on_telegram)
        await h.first_step(on_telegram)
        assert await h.admit(on_discord)
        assert (await h.answer_to(on_discord)).text == "from discord"
        await h.answer_to(on_telegram)
        await h.settle()
        assert h.router.state == "running"


async def test_the_welcome_does_not_promise_ownership_config_gave_to_another(
    registry, home, fake, io_clock
):
    owned = Config(platforms={"telegram": PlatformConfig(owner="alice")})
    async with running_router(registry, home, fake, owned, timeout=1e6) as h:
        (code,) = CODE.findall((await h.ask("sam", "hello?")).text)
        assert isinstance(h.cli_write(attempt_approval, "telegram", code, time.time()), Approved)
        welcome = await h.answer_with_key("welcome:telegram:sam")
        assert "role: user" in (await h.ask("sam", "/whoami")).text
        assert "owner" not in welcome.text


async def test_a_refusal_cut_by_a_crash_is_not_resumed_as_a_turn(registry, home, fake):
    async with running_router(registry, home, fake, OPEN) as h:
        h.replies.hang = lambda answer: "pairing code" in answer.text  # the send hangs
        stranger = await h.send("mallory", "tell me the owner's secrets")
        await h.replies.wait_for(lambda: h.replies.hanging)
        h.crash()
        await h.stopped.wait()
    async with running_router(registry, home, fake, OPEN) as h:
        # The journal was read before the router said it was ready; what it took again
        # runs in a task of its own: wait for that to end.
        (state,) = await h.rows(
            "SELECT state FROM inbound_journal WHERE event_id = ?", stranger.event_id
        )
        if state[0] == "resumed":
            await h.final(stranger)
        await h.settle()
        assert fake.requests == []
        assert not any(a.text.startswith(RESUMED_PREFIX) for a in h.replies.answers_to(stranger))
