"""Mirrors and continuable briefs (spec/delivery.md): which sessions a brief seeds, the
user-id guard, the flat and thread seeds anchored on the sent message id, the mirror
committed with the row's `sent`, and the eligibility matrix through a real queue."""

from __future__ import annotations

import time
from zoneinfo import ZoneInfo

import pytest

from hermes.adapters.contract import Target
from hermes.adapters.settings import PlatformConfig
from hermes.cron.briefs import queue_brief
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import NewJob, create_job
from hermes.delivery.channels import set_home
from hermes.delivery.mirror import Mirror, Seed, plan_seeds
from hermes.delivery.outbox_store import enqueue, mark_sending, mark_sent
from hermes.delivery.session_keys import Keying
from hermes.delivery.targets import Origin, PlannedTarget
from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_message
from hermes.state.sessions import NewSession, ensure_session

PER_USER = Keying(thread_per_user=False)  # group sessions per user, threads shared
ORIGIN = Origin("tp", "g1", None, "u1", None, "group")
GROUP = Target("tp", "g1")


def planned(target=GROUP, mirror=True, provenance="origin"):
    return PlannedTarget(target, provenance, mirror)


# -- planning the seeds -----------------------------------------------------------------


def test_a_flat_brief_seeds_the_flat_session_and_its_own_thread():
    seeds, note = plan_seeds(planned(), ORIGIN, "group", PER_USER)
    assert seeds == (Seed("group", "u1"), Seed("group", "u1", thread=True)) and note is None


def test_a_brief_into_a_thread_seeds_that_thread_only():
    """The brief and its seed are in the same place: never the flat session for it."""
    seeds, _ = plan_seeds(planned(Target("tp", "g1", "t5")), ORIGIN, "group", PER_USER)
    assert seeds == (Seed("group", "u1"),)  # keyed on the row's own target: thread t5


def test_no_user_in_a_per_user_group_seeds_no_flat_session():
    """A per-user flat session without a user id is one no reply resolves to."""
    no_user = Origin("tp", "g1", chat_type="group")
    seeds, note = plan_seeds(planned(), no_user, "group", PER_USER)
    assert seeds == (Seed("group", None, thread=True),)  # the shared thread needs no user
    assert "per user" in note
    shared = Keying(frozenset({"tp"}), thread_per_user=False)
    assert plan_seeds(planned(), no_user, "group", shared) == (
        (Seed("group", None), Seed("group", None, thread=True)),
        None,
    )
    # Threads per user too (the default): no session to seed without a user.
    assert plan_seeds(planned(), no_user, "group", Keying()) == ((), note)


def test_a_dm_always_seeds():
    seeds, note = plan_seeds(planned(Target("tp", "d1")), None, "dm", PER_USER)
    assert seeds == (Seed("dm", None), Seed("dm", None, thread=True)) and note is None


def test_not_mirrored_or_an_unknown_chat_seeds_nothing():
    assert plan_seeds(planned(mirror=False), ORIGIN, "group", PER_USER) == ((), None)
    seeds, note = plan_seeds(planned(Target("tp", "g9"), provenance="explicit"), ORIGIN, None,
                             PER_USER)  # fmt: skip
    assert seeds == () and "has not seen" in note


# -- writing them when the row is sent ----------------------------------------------------


async def sessions_of(db: Db) -> dict[str, tuple[str, list[str]]]:
    """session key -> (session id, its message texts)."""

    def read(conn):
        found = {}
        for sid, key in conn.execute("SELECT id, session_key FROM sessions ORDER BY rowid"):
            texts = [
                r[0]
                for r in conn.execute(
                    "SELECT content FROM messages WHERE session_id = ? ORDER BY id", (sid,)
                )
            ]
            found[key] = (sid, texts)
        return found  # fmt: skip

    return await db.read(read)


async def queue(db: Db, mirror: Mirror | None, key: str = "b1") -> list[int]:
    return await db.write(enqueue, GROUP, ["THE BRIEF"], "cron", key, time.time(),
                          mirror=mirror)  # fmt: skip


async def send(db: Db, row_id: int, message_id: str) -> None:
    await db.write(mark_sending, row_id, time.time())
    await db.write(mark_sent, row_id, message_id, time.time(), PER_USER)


async def test_a_sent_brief_seeds_both_sessions_anchored_on_its_message_id(registry, home):
    async with Db(registry, home.state_db) as db:
        # the flat key's live session exists: it is the one written, not a new one
        await db.write(
            ensure_session,
            NewSession(
                "tp_live",
                source="tp",
                session_key="agent:main:tp:group:g1:user:u1",
                started_at=time.time(),
            ),
        )
        await db.write(
            append_message, NewMessage("tp_live", "user", "schedule it", timestamp=time.time())
        )
        seeds = (Seed("group", "u1"), Seed("group", "u1", thread=True))
        (row,) = await queue(db, Mirror("THE BRIEF", seeds))
        assert list(await sessions_of(db)) == ["agent:main:tp:group:g1:user:u1"]  # not before sent
        await send(db, row, "m7")
        found = await sessions_of(db)
        outcome = await db.read(
            lambda c: c.execute("SELECT mirror_outcome FROM outbox WHERE id = ?", (row,)).get
        )
    assert found["agent:main:tp:group:g1:user:u1"] == ("tp_live", ["schedule it", "THE BRIEF"])
    thread_id, thread_texts = found["agent:main:tp:group:g1:thread:m7"]  # the brief's own thread
    assert thread_texts == ["THE BRIEF"]
    assert outcome == f"seeded tp_live, {thread_id}"


async def test_a_mirror_that_fails_leaves_the_row_sent_and_says_so(registry, home):
    async with Db(registry, home.state_db) as db:
        (row,) = await queue(db, Mirror("THE BRIEF", (Seed("no-such-kind", "u1"),)))
        await send(db, row, "m8")
        state, outcome = await db.read(
            lambda c: c.execute("SELECT state, mirror_outcome FROM outbox WHERE id = ?",
                                (row,)).fetchone()
        )  # fmt: skip
        assert await sessions_of(db) == {}  # nothing half-written
    assert state == "sent" and outcome.startswith("not mirrored:")


# -- the eligibility matrix through a real queue --------------------------------------------

HOME = "h1"


@pytest.mark.parametrize("global_switch", [False, True])
@pytest.mark.parametrize("attach", [None, True, False])
@pytest.mark.parametrize(
    ("deliver", "origin", "target"),
    [("origin", ORIGIN, "tp:g1"),
     ("origin", None, f"tp:{HOME}"),  # origin_fallback: the home channel stands in
     ("tp:g2", ORIGIN, "tp:g2"),  # explicit
     ("all", ORIGIN, f"tp:{HOME}"),
     ("tp", ORIGIN, f"tp:{HOME}"),  # a bare platform: its home channel, a broadcast
     ("tp:g3", ORIGIN, "tp:g3")],  # another chat, named explicitly
    ids=["origin", "origin_fallback", "explicit", "all", "bare-platform", "other-chat"],
)  # fmt: skip
async def test_mirror_eligibility(registry, home, deliver, origin, target, attach, global_switch):
    provenance = {"origin": "origin", "tp:g2": "explicit", "tp:g3": "explicit"}.get(deliver)
    if deliver == "origin" and origin is None:
        provenance = "origin_fallback"
    switch = attach if attach is not None else global_switch
    expected = {"origin": switch, "origin_fallback": switch, "explicit": attach is True}.get(
        provenance, False
    )
    async with Db(registry, home.state_db) as db:
        for chat in ("g1", "g2", "g3", HOME):  # hermes has talked in each: group chats
            await db.write(ensure_session, NewSession(f"s-{chat}", source="tp", chat_id=chat,
                                                      chat_type="group",
                                                      started_at=time.time()))  # fmt: skip
        await db.write(set_home, Target("tp", HOME), "u1", time.time())
        schedule = parse_schedule("every 1h", ZoneInfo("UTC"), time.time())
        job = await db.write(create_job, NewJob("j", schedule, prompt="p", deliver=deliver,
                                                origin=origin, attach_to_session=attach),
                             time.time(), ZoneInfo("UTC"))  # fmt: skip
        problems = await db.write(queue_brief, job, 1, "THE BRIEF", {"tp": PlatformConfig()},
                                  PER_USER, global_switch, time.time())  # fmt: skip
        rows = await db.read(lambda c: list(c.execute(
            "SELECT platform || ':' || chat_id, mirror IS NOT NULL FROM outbox")))  # fmt: skip
    assert problems == []
    assert rows == [(target, int(expected))]


async def test_a_brief_written_from_untrusted_text_is_mirrored_with_its_mark(registry, home):
    """The fire's turn read a web page: the brief it wrote is that page's words in the
    conversation it seeds, marked, so the owner's next command there is confined."""
    async with Db(registry, home.state_db) as db:
        fire = "cron_j1_20261206T000000"
        await db.write(ensure_session, NewSession(fire, source="cron", started_at=time.time()))
        page = NewMessage(fire, "tool", "the page", tool_call_id="c1", tool_name="web_fetch",
                          timestamp=time.time(), untrusted="web_fetch of example.org")  # fmt: skip
        await db.write(append_message, page)
        schedule = parse_schedule("every 1h", ZoneInfo("UTC"), time.time())
        job = await db.write(create_job, NewJob("j", schedule, prompt="p", deliver="origin",
                                                origin=ORIGIN, attach_to_session=True),
                             time.time(), ZoneInfo("UTC"))  # fmt: skip
        await db.write(queue_brief, job, 1, "THE BRIEF", {"tp": PlatformConfig()}, PER_USER,
                       False, time.time(), fire)  # fmt: skip
        (row,) = await db.read(lambda c: [r[0] for r in c.execute("SELECT id FROM outbox")])
        await send(db, row, "m9")
        marks = await db.read(
            lambda c: c.execute(
                "SELECT session_id, untrusted FROM messages WHERE content = 'THE BRIEF'"
            ).fetchall()
        )
    assert len(marks) == 2  # the flat session and the brief's own thread
    assert {m for _, m in marks} == {"web_fetch of example.org"}
