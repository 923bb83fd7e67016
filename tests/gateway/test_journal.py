"""The inbound journal: admitted once per key, claimed once, resumed once, pruned."""

from __future__ import annotations

import os
import socket

import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import ChatType, Cursor, InboundEvent
from hermes.adapters.cursors import Cursors
from hermes.gateway.journal import (
    ANSWERED,
    REFUSED,
    admit,
    admitted,
    claim,
    claim_interrupted,
    finish,
    prune,
    release,
)
from hermes.state.db import Db

T0 = 1_800_000_000.0


def event(n: int, **kw) -> InboundEvent:
    return InboundEvent("tg", f"u{n}", ChatType.DM, "c1", "42", f"message {n}", **kw)


async def test_a_duplicate_is_recognised_and_an_event_is_claimed_once(registry, db_path):
    async with Db(registry, db_path) as db:
        first = event(1, attachments=("/tmp/a.jpg",), mentioned=True, user_name="ann")
        assert await db.write(admit, first, T0, None)
        assert not await db.write(admit, first, T0 + 1, None)  # a retry of the same delivery
        assert await db.read(admitted) == [first]  # stored whole, read back whole
        assert await db.write(claim, "tg", "u1", "serve-a", T0 + 2)
        assert not await db.write(claim, "tg", "u1", "serve-b", T0 + 2)  # never twice
        assert await db.read(admitted) == []


async def test_a_poll_offset_commits_with_the_admission_a_duplicate_included(registry, db_path):
    async with Db(registry, db_path) as db, Cursors(registry, db_path, Clock()) as kept:
        assert await db.write(admit, event(1), T0, None, Cursor("tg:offset", "2"))
        assert await kept.get("tg:offset") == "2"
        assert not await db.write(admit, event(1), T0 + 1, None, Cursor("tg:offset", "3"))
        assert await kept.get("tg:offset") == "3"  # a replayed batch still moves it on


async def test_an_interrupted_turn_is_resumed_once_and_only_if_young(registry, db_path):
    """Only turns of a serve that is gone are resumed: a live one finishes its own."""
    gone = await trio.lowlevel.open_process(["true"])
    await gone.wait()  # reaped: a pid that no longer runs
    dead = f"{socket.gethostname()}:{gone.pid}:old"
    alive = f"{socket.gethostname()}:{os.getpid()}:live"
    async with Db(registry, db_path) as db:
        for n, started, owner in ((1, T0, dead), (2, T0 + 500, dead), (3, T0 + 550, dead),
                                  (4, T0 + 560, alive)):  # fmt: skip
            await db.write(admit, event(n), started, None)
            await db.write(claim, "tg", f"u{n}", owner, started)
        await db.write(finish, "tg", "u3", ANSWERED, "s1", T0 + 560)  # this one was answered
        now = T0 + 600
        taken = await db.write(claim_interrupted, "serve-new", now, 300.0)
        assert [e.event_id for e in taken] == ["u2"]  # u1 is too old; u4's serve still runs
        assert await db.write(claim_interrupted, "serve-other", now, 300.0) == []
        assert await db.write(claim_interrupted, "serve-new-again", now + 1, 300.0) == []


async def test_an_event_admitted_for_a_live_router_is_started_by_it_in_that_one_commit(
    registry, db_path
):
    """Admission while a router runs writes the row claimed by it: no second claim takes
    it. If that router was gone before it heard, `release` hands the row to the next;
    if a next router resumed it already, `release` leaves it alone."""
    gone = await trio.lowlevel.open_process(["true"])
    await gone.wait()
    dead = f"{socket.gethostname()}:{gone.pid}:old"
    async with Db(registry, db_path) as db:
        assert await db.write(admit, event(1), T0, "serve-a")
        assert not await db.write(admit, event(1), T0 + 1, "serve-a")  # still a duplicate
        assert await db.read(admitted) == []  # started: no router claims it
        assert not await db.write(claim, "tg", "u1", "serve-b", T0 + 2)

        await db.write(admit, event(2), T0, "serve-a")
        await db.write(release, "tg", "u2", "serve-a")  # serve-a stopped before it heard
        assert await db.read(admitted) == [event(2)]
        assert await db.write(claim, "tg", "u2", "serve-b", T0 + 2)

        await db.write(admit, event(3), T0 + 10, dead)  # its router died with it unheard
        taken = await db.write(claim_interrupted, "serve-c", T0 + 20, 300.0)
        assert [e.event_id for e in taken] == ["u3"]  # resumed once by the next router
        await db.write(release, "tg", "u3", dead)  # too late: serve-c has it
        assert await db.read(admitted) == []
        assert await db.write(claim_interrupted, "serve-d", T0 + 21, 300.0) == []


async def test_old_rows_are_pruned_once_done_with(registry, db_path):
    async with Db(registry, db_path) as db:
        for n in (1, 2, 3, 4, 5):
            await db.write(admit, event(n), T0, None)
        await db.write(admit, event(6), T0 + 100, None)
        await db.write(finish, "tg", "u1", ANSWERED, "s1", T0 + 1)
        await db.write(finish, "tg", "u2", REFUSED, None, T0 + 1)
        await db.write(claim, "tg", "u3", "serve-a", T0 + 1)  # a turn cut long ago
        await db.write(claim, "tg", "u4", "serve-a", T0 + 60)  # a turn that may still run
        assert await db.write(prune, T0 + 50) == 3
        left = await db.read(lambda c: [r[0] for r in c.execute(
            "SELECT event_id FROM inbound_journal ORDER BY event_id")])  # fmt: skip
        assert left == ["u4", "u5", "u6"]  # u5 was never taken: the router takes it
