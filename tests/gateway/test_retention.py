"""The Retention actor prunes state.db while serve runs, each table on its own rule.

Each test starts the actor, lets its pass at start go by, then writes old and
recent rows and lets the mock clock run to the next pass: what the rule lets go
is gone, what is still needed stays. The clock is `io_clock` (SQLite works in a
thread), a test's own argument: pytest-trio looks for the clock there. The
cutoffs are wall-clock times, so old rows are written with old timestamps.
"""

from __future__ import annotations

import logging
import os
import time
from zoneinfo import ZoneInfo

import pytest
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import ChatType, InboundEvent, Target
from hermes.adapters.media import MediaLimits
from hermes.cron.lifecycle import finish_fire
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import NewJob, claim_now, create_job, record_target
from hermes.delivery.outbox_store import (
    enqueue,
    mark_dead,
    mark_sending,
    mark_sent,
    mark_unknown,
)
from hermes.delivery.targets import PlannedTarget
from hermes.gateway.journal import ANSWERED, admit, claim, finish
from hermes.gateway.retention import Files, Retention
from hermes.gateway.settings import RetentionConfig
from hermes.state.db import Db

PRUNE_EVERY = 600.0
RULES = RetentionConfig(cron_runs_per_job=3, prune_every=PRUNE_EVERY)
DAY = 86400.0
UTC = ZoneInfo("UTC")


async def passes(actor: Retention, count: int) -> None:
    while actor.passes < count:
        await actor.passed.wait()


async def next_pass(actor: Retention) -> dict[str, int]:
    """Let the mock clock run to the actor's next pass; what that pass pruned."""
    await passes(actor, actor.passes + 1)
    assert trio.current_time() >= PRUNE_EVERY * (actor.passes - 1)  # the timer's pass
    return actor.last


@pytest.fixture
async def pruner(registry, home):
    actor = Retention(registry, home.state_db, RULES, Clock(time.time() - trio.current_time()))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await passes(actor, 1)  # the pass at start: nothing to prune yet
        yield actor
        actor.stop()


@pytest.fixture
async def db(registry, home):
    async with Db(registry, home.state_db) as handle:
        yield handle


def column(db: Db, sql: str):
    return db.read(lambda conn: [row[0] for row in conn.execute(sql)])


def event(n: int) -> InboundEvent:
    return InboundEvent("tg", f"u{n}", ChatType.DM, "c1", "42", f"message {n}")


async def test_journal_rows_go_once_done_with(pruner, db, io_clock):
    now = time.time()
    old = now - 8 * DAY  # journal_days is 7

    def write(conn):
        for n in (1, 2, 3, 4):
            admit(conn, event(n), old, None)
        admit(conn, event(5), now - DAY, None)
        finish(conn, "tg", "u1", ANSWERED, "s1", old + 1)
        claim(conn, "tg", "u2", "serve-a", old + 1)  # a turn cut a week ago
        claim(conn, "tg", "u3", "serve-a", now - 60)  # taken late: its turn may still run
        finish(conn, "tg", "u5", ANSWERED, "s1", now - DAY)  # u4: never taken yet

    await db.write(write)
    assert (await next_pass(pruner))["inbound_journal"] == 2
    ids = "SELECT event_id FROM inbound_journal ORDER BY event_id"
    assert await column(db, ids) == ["u3", "u4", "u5"]


async def test_sent_outbox_rows_go_after_their_days_and_unsent_ones_stay(pruner, db, io_clock):
    now = time.time()
    old = now - 31 * DAY  # outbox_sent_days is 30

    def write(conn):
        for n, at in ((1, old), (2, now - DAY)):
            (row,) = enqueue(conn, Target("tg", f"sent{n}"), ["hi"], "reply", f"k{n}", at)
            mark_sending(conn, row, at)
            mark_sent(conn, row, f"m{n}", at)
        (pending,) = enqueue(conn, Target("tg", "pending"), ["hi"], "reply", "k3", old)
        (dead,) = enqueue(conn, Target("tg", "dead"), ["hi"], "reply", "k4", old)
        mark_dead(conn, dead, "403: blocked", old)
        (unknown,) = enqueue(conn, Target("tg", "unknown"), ["hi"], "reply", "k5", old)
        mark_sending(conn, unknown, old)
        mark_unknown(conn, unknown, "the answer was lost", old)

    await db.write(write)
    assert (await next_pass(pruner))["outbox"] == 1
    chats = "SELECT chat_id FROM outbox ORDER BY id"
    assert await column(db, chats) == ["sent2", "pending", "dead", "unknown"]


async def test_each_job_keeps_its_newest_runs_and_a_running_one(pruner, db, io_clock):
    now = time.time()

    def write(conn):
        jobs = [
            create_job(conn, NewJob(name, parse_schedule("every 1m", UTC, now), prompt="p"),
                       now, UTC)
            for name in ("done", "long")
        ]  # fmt: skip
        done, long = (job.id for job in jobs)
        for _ in range(5):
            fence = claim_now(conn, done, "me", now, 30.0, None).fence
            finish_fire(conn, done, fence, "ok", now)
        claim_now(conn, long, "me", now, 3600.0, None)  # holds its lease, still running
        for _ in range(4):  # its occurrences skipped meanwhile (the scheduler's overlap rule)
            conn.execute(
                "INSERT INTO cron_runs (job_id, owner, started_at, finished_at, status)"
                " VALUES (?, 'me', ?, ?, 'skipped')",
                (long, now, now),
            )
        return done, long

    done, long = await db.write(write)
    assert (await next_pass(pruner))["cron_runs"] == 3
    runs = await db.read(
        lambda c: c.execute("SELECT job_id, fence, status FROM cron_runs ORDER BY id").fetchall()
    )
    assert runs == [
        (done, 3, "ok"), (done, 4, "ok"), (done, 5, "ok"),  # the newest 3 (cron_runs_per_job)
        (long, 1, "running"),  # older than its job's newest 3, and still running
        (long, None, "skipped"), (long, None, "skipped"), (long, None, "skipped"),
    ]  # fmt: skip


async def test_cron_delivery_records_go_after_their_days(pruner, db, io_clock):
    now = time.time()
    planned = PlannedTarget(Target("tg", "c1"), "origin", False)

    def write(conn):
        for fence, at in ((1, now - 31 * DAY), (2, now - DAY)):  # cron_deliveries_days is 30
            record_target(conn, "j1", fence, planned, f"cron:j1:{fence}", "queued", None, at)

    await db.write(write)
    assert (await next_pass(pruner))["cron_deliveries"] == 1
    assert await column(db, "SELECT fence FROM cron_deliveries") == [2]


async def test_pairing_failures_go_after_their_hours_with_one_log_line(
    pruner, db, caplog, io_clock
):
    caplog.set_level(logging.INFO, logger="hermes.gateway.retention")
    now = time.time()
    await db.write(
        lambda conn: conn.executemany(
            "INSERT INTO pairing_failures (platform, at) VALUES ('tg', ?)",
            [(now - 25 * 3600,), (now - 3 * 3600,)],  # pairing_failures_hours is 24
        )
    )
    assert (await next_pass(pruner))["pairing_failures"] == 1
    assert await column(db, "SELECT at FROM pairing_failures") == [now - 3 * 3600]
    await next_pass(pruner)  # nothing left to prune: no line
    lines = [r.getMessage() for r in caplog.records if r.name == "hermes.gateway.retention"]
    assert lines == ["retention: pruned 1 from pairing_failures"]


async def test_what_piled_up_before_the_start_goes_in_the_pass_at_start(
    registry, home, db, io_clock
):
    now = time.time()
    await db.write(
        lambda conn: conn.execute(
            "INSERT INTO pairing_failures (platform, at) VALUES ('tg', ?)", (now - 25 * 3600,)
        )
    )
    actor = Retention(registry, home.state_db, RULES, Clock(time.time() - trio.current_time()))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await passes(actor, 1)
        assert actor.last["pairing_failures"] == 1
        assert trio.current_time() < PRUNE_EVERY
        actor.stop()


async def test_a_pass_evicts_the_media_cache_and_old_copies_of_sent_files(registry, home):
    """A platform that receives nothing more evicts nothing itself: the pass does, by age
    and size per platform, and removes copies of files sent longer ago than the journal
    is kept."""
    now = time.time()
    cache, outgoing = home.cache / "telegram", home.outgoing
    for directory in (cache, outgoing):
        directory.mkdir(parents=True, exist_ok=True)

    def made(path, size: int, age_days: float):
        path.write_bytes(b"x" * size)
        os.utime(path, (now - age_days * DAY, now - age_days * DAY))
        return path

    old = made(cache / "old.jpg", 10, 3)  # past max_age
    oldest_big, big = made(cache / "a.bin", 600, 0.5), made(cache / "b.bin", 600, 0.1)
    sent_long_ago = made(outgoing / "sent.pdf", 10, RULES.journal_days + 1)
    queued = made(outgoing / "queued.pdf", 10, 0.1)
    files = Files(home.cache, home.outgoing, MediaLimits(cache_cap=1000, max_age=DAY))
    actor = Retention(registry, home.state_db, RULES, Clock(time.time() - trio.current_time()),
                      files=files)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await passes(actor, 1)
        actor.stop()
    assert actor.last["media cache"] == 2 and actor.last["outgoing files"] == 1
    assert [p.exists() for p in (old, oldest_big, big)] == [False, False, True]
    assert [p.exists() for p in (sent_long_ago, queued)] == [False, True]
