"""Each transition of a job's life (hermes.cron.lifecycle), one test each, on the
autojump clock (`io_clock`) with a real state.db; the real Scheduler runs wherever the
transition involves it (lease expiry, shutdown, retries, zones, wake-ups)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import trio

from hermes.cron.lifecycle import (
    EXPIRED,
    LOST,
    SHUT_DOWN,
    Cause,
    claim,
    claim_due,
    finish_fire,
    heartbeat,
    interrupt,
    rezone,
)
from hermes.cron.scheduler import CancelFire, JobsChanged
from hermes.cron.store import (
    JobError,
    cancel_job,
    claim_now,
    get_job,
    list_jobs,
    run_history,
    set_paused,
)
from hermes.state.db import Db
from hermes.state.registry import Registry
from tests.cron.harness import (
    T0,
    UTC,
    Runner,
    add_job,
    cut_by_shutdown,
    history,
    make_scheduler,
    scheduling,
    settle,
    wait_runs,
    write,
)

LA = ZoneInfo("America/Los_Angeles")
LEASE = 30.0


@pytest.fixture
async def registry():
    """As the suite's, with an hourly checkpoint: these tests cross days of mock time, and
    each checkpoint is real work in a thread that the mock clock waits out."""
    reg = Registry(checkpoint_interval=3600.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        yield reg
        reg.request_drain(trio.current_time() + 30)


@pytest.fixture
async def db(registry, home, io_clock):
    async with Db(registry, home.state_db) as gen:
        yield gen


def now() -> float:
    return T0 + trio.current_time()


async def runs_of(db, job_id) -> list[tuple]:
    """(fence, status, error) of each run, oldest first."""
    return [(r.fence, r.status, r.error) for r in reversed(await db.read(run_history, job_id))]


# -- a fire -----------------------------------------------------------------------------


async def test_claim_takes_the_lease_and_advances_the_next_run(registry, home, db):
    job = await add_job(registry, home, "every 10m")
    due = job.next_run_at
    report = await db.write(claim_due, "A", due, LEASE, UTC)
    ((taken,),) = [report.claims]
    claimed = await db.read(get_job, job.id)
    assert (taken.fence, taken.due_at) == (1, due)
    assert (claimed.running_fence, claimed.lease_owner, claimed.lease_expires_at) == (
        1, "A", due + LEASE,
    )  # fmt: skip
    assert claimed.next_run_at == due + 600 and claimed.state == "scheduled"
    assert await runs_of(db, job.id) == [(1, "running", None)]
    # a claim that read the job before is refused: the job moved on
    assert await db.write(claim, job, "B", due, LEASE, None, None, due) is None
    assert (await db.write(claim_due, "B", due + 1, LEASE, UTC)).claims == []


async def test_finish_ok_records_the_result_and_keeps_the_schedule(registry, home, db):
    job = await add_job(registry, home, "every 10m")
    fence = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0].fence
    streak = await db.write(finish_fire, job.id, fence, "ok", job.next_run_at + 5, None, "/out")
    done = await db.read(get_job, job.id)
    assert streak == 0
    assert (done.state, done.last_status, done.running_fence, done.lease_owner) == (
        "scheduled", "ok", None, None,
    )  # fmt: skip
    assert done.next_run_at == job.next_run_at + 600 and done.repeat_completed == 1
    (run,) = await db.read(run_history, job.id)
    assert (run.status, run.finished_at, run.output_path) == ("ok", job.next_run_at + 5, "/out")


async def test_a_failure_counts_in_a_streak_that_success_resets(registry, home, db):
    job = await add_job(registry, home, "every 1m")
    at, streaks = job.next_run_at, []
    for status in ("error", "error", "ok", "error"):
        fence = (await db.write(claim_due, "A", at, LEASE, UTC)).claims[0].fence
        streaks.append(await db.write(finish_fire, job.id, fence, status, at + 1, "boom"))
        at += 60
    assert streaks == [1, 2, 0, 1]
    assert [s for _, s, _ in await runs_of(db, job.id)] == ["error", "error", "ok", "error"]
    assert (await db.read(get_job, job.id)).last_status == "error"


async def test_cancelling_a_running_fire(registry, home, io_clock):
    """From the CLI (the lease is revoked; the worker's lease watch stops the fire) and in
    serve (CancelFire): a recurring job waits for its next run, a one-shot ends."""
    runner = Runner(delay=1000)
    sched = make_scheduler(home, registry, runner)
    async with scheduling(sched) as address:
        hourly = await add_job(registry, home, "every 1h", address)
        await wait_runs(runner, 1)
        await write(registry, home, cancel_job, hourly.id, now())  # as `hermes cron cancel`
        await settle(sched)
        once = await add_job(registry, home, "in 1m", address, name="once")
        await wait_runs(runner, 2)
        assert await address.call(CancelFire(once.id)) == [f"{once.id}#1"]
        await settle(sched)
    runs, job = await history(registry, home, hourly.id)
    assert [(r.status, r.error) for r in runs] == [("cancelled", None)]
    assert (job.state, job.last_status, job.running_fence) == ("scheduled", "cancelled", None)
    assert job.next_run_at == hourly.next_run_at + 3600
    runs, job = await history(registry, home, once.id)
    assert [r.status for r in runs] == ["cancelled"]
    assert (job.state, job.next_run_at, job.retired_reason) == (
        "cancelled", None, "its fire was cancelled",
    )  # fmt: skip


async def test_cancelling_a_job_that_is_not_running_is_refused(registry, home, db):
    job = await add_job(registry, home, "every 1h")
    with pytest.raises(JobError, match=f"job {job.id} is not running"):
        await db.write(cancel_job, job.id, now())
    assert await db.read(get_job, job.id) == job and await runs_of(db, job.id) == []


async def test_an_expired_lease_interrupts_the_fire_and_the_job_waits_for_its_next(
    registry, home, io_clock
):
    job = await add_job(registry, home, "every 1h")
    due = job.next_run_at
    await write(registry, home, claim_due, "dead", due, LEASE, UTC)  # its worker then dies
    runner = Runner()
    sched = make_scheduler(home, registry, runner)
    async with scheduling(sched):
        await wait_runs(runner, 1)
        await settle(sched)
    ((fired_at, _),) = runner.prompts
    assert fired_at + T0 == due + 3600  # not at the expiry: at the next occurrence
    runs, final = await history(registry, home, job.id)
    assert [(r.fence, r.status, r.error, r.finished_at) for r in reversed(runs)] == [
        (1, "interrupted", EXPIRED, due + LEASE),  # recorded when the lease ran out
        (2, "ok", None, due + 3600),
    ]
    assert final.state == "scheduled" and final.next_run_at == due + 7200


async def test_shutdown_interrupts_a_fire_on_its_own_token(registry, home, io_clock):
    job = await cut_by_shutdown(registry, home, "every 1h")
    runs, final = await history(registry, home, job.id)
    assert [(r.fence, r.status, r.error) for r in runs] == [(1, "interrupted", SHUT_DOWN)]
    assert (final.state, final.last_status, final.running_fence) == (
        "scheduled", "interrupted", None,
    )  # fmt: skip
    assert final.next_run_at == job.next_run_at + 3600


async def test_a_job_completes_when_its_repeat_count_is_reached(registry, home, io_clock):
    runner = Runner()
    sched = make_scheduler(home, registry, runner)
    async with scheduling(sched) as address:
        job = await add_job(registry, home, "every 1m", address, repeat_times=2)
        await wait_runs(runner, 2)
        await settle(sched)
        await trio.sleep(600)  # ten more minutes on the mock clock: no third fire
    assert len(runner.prompts) == 2
    runs, final = await history(registry, home, job.id)
    assert [r.status for r in runs] == ["ok", "ok"]
    assert (final.state, final.next_run_at, final.repeat_completed) == ("completed", None, 2)


async def test_pause_and_resume(registry, home, db):
    job = await add_job(registry, home, "every 10m")
    paused = await db.write(set_paused, job.id, True, now(), UTC)
    assert paused.state == "paused"
    assert (await db.write(claim_due, "A", job.next_run_at + 60, LEASE, UTC)).claims == []
    later = job.next_run_at + 25 * 60
    resumed = await db.write(set_paused, job.id, False, later, UTC)
    assert resumed.state == "scheduled"
    assert resumed.next_run_at == job.next_run_at + 30 * 60  # from now: no catch-up
    assert await runs_of(db, job.id) == []  # nothing ran while it was paused
    # a job that has ended is neither paused nor resumed
    once = await add_job(registry, home, "in 1m", name="once")
    fence = (await db.write(claim_due, "A", once.next_run_at, LEASE, UTC)).claims[0].fence
    await db.write(finish_fire, once.id, fence, "ok", once.next_run_at + 1)
    with pytest.raises(JobError, match="has ended: completed"):
        await db.write(set_paused, once.id, True, now(), UTC)


async def test_a_stale_workers_writes_are_refused(registry, home, db):
    """A stalls past its lease; B takes the next occurrence. Nothing A writes lands."""
    job = await add_job(registry, home, "every 1m")
    due = job.next_run_at
    old = (await db.write(claim_due, "A", due, LEASE, UTC)).claims[0]
    later = due + 60 + LEASE
    new = (await db.write(claim_due, "B", later, LEASE, UTC)).claims[0]
    assert new.fence == old.fence + 1
    assert await db.write(heartbeat, job.id, old.fence, "A", later, LEASE) is False
    assert await db.write(finish_fire, job.id, old.fence, "error", later + 1, "late") is None
    assert await db.write(interrupt, job.id, old.fence, Cause.LEASE, LOST, later + 2) is False
    assert await db.write(interrupt, job.id, old.fence, Cause.CANCELLED, "", later + 2) is False
    mid = await db.read(get_job, job.id)
    assert (mid.running_fence, mid.lease_owner, mid.failure_streak) == (new.fence, "B", 0)
    assert await db.write(finish_fire, job.id, new.fence, "ok", later + 3) == 0
    assert await runs_of(db, job.id) == [
        (old.fence, "interrupted", EXPIRED),  # what the expiry recorded stands
        (new.fence, "ok", None),
    ]


# -- the interrupted one-shot ------------------------------------------------------------


async def test_a_one_shot_whose_worker_died_fires_again_once(registry, home, io_clock):
    once = await add_job(registry, home, "in 1m")
    due = once.next_run_at
    await write(registry, home, claim_due, "dead", due, LEASE, UTC)  # SIGKILLed mid-fire
    runner = Runner()
    sched = make_scheduler(home, registry, runner)
    async with scheduling(sched):
        await wait_runs(runner, 1)
        await settle(sched)
        await trio.sleep(3 * 3600)  # past its grace window: it fires no more
    ((fired_at, _),) = runner.prompts
    assert fired_at + T0 == pytest.approx(due + LEASE, abs=1)  # as soon as the lease ran out
    runs, final = await history(registry, home, once.id)
    assert [(r.fence, r.status, r.due_at) for r in reversed(runs)] == [
        (1, "interrupted", due),
        (2, "ok", due),  # the same occurrence, fired again
    ]
    assert (final.state, final.next_run_at, final.last_status) == ("completed", None, "ok")


async def test_a_one_shot_interrupted_twice_ends_interrupted(registry, home, db):
    once = await add_job(registry, home, "in 1m")
    due = once.next_run_at
    await db.write(claim_due, "dead", due, LEASE, UTC)
    retry = await db.write(claim_due, "also-dead", due + LEASE, LEASE, UTC)
    assert [c.fence for c in retry.claims] == [2]  # fired again at once, then that worker died
    report = await db.write(claim_due, "C", due + 2 * LEASE, LEASE, UTC)
    assert report.claims == [] and report.expired == [(once.id, 2)]
    final = await db.read(get_job, once.id)
    assert (final.state, final.next_run_at, final.last_status) == (
        "interrupted", None, "interrupted",
    )  # fmt: skip
    assert final.retired_reason == f"interrupted twice; the last time: {EXPIRED}"
    assert await runs_of(db, once.id) == [(1, "interrupted", EXPIRED), (2, "interrupted", EXPIRED)]
    assert once.id not in [j.id for j in await db.read(list_jobs)]
    assert once.id in [j.id for j in await db.read(list_jobs, True)]


async def test_a_one_shot_interrupted_past_its_grace_ends_interrupted(registry, home, db):
    once = await add_job(registry, home, "in 1m")
    due = once.next_run_at
    await db.write(claim_due, "dead", due, LEASE, UTC)
    report = await db.write(claim_due, "B", due + 3 * 3600, LEASE, UTC)  # the machine was off
    assert report.claims == []
    final = await db.read(get_job, once.id)
    assert final.state == "interrupted"
    assert final.retired_reason == f"interrupted ({EXPIRED}) past its grace window; not fired again"


async def test_a_one_shot_cut_by_shutdown_fires_again_once_on_next_start(registry, home, io_clock):
    once = await cut_by_shutdown(registry, home, "in 1m")
    between = (await history(registry, home, once.id))[1]
    assert (between.state, between.next_run_at) == ("scheduled", once.next_run_at)
    restarted = trio.current_time()
    second = Runner()
    sched = make_scheduler(home, registry, second)
    async with scheduling(sched):
        await wait_runs(second, 1)
        await settle(sched)
        await trio.sleep(3600)
    ((fired_at, _),) = second.prompts
    assert fired_at == pytest.approx(restarted, abs=1)  # at once, within its grace
    runs, final = await history(registry, home, once.id)
    assert [(r.status, r.error) for r in reversed(runs)] == [
        ("interrupted", SHUT_DOWN), ("ok", None),
    ]  # fmt: skip
    assert final.state == "completed"


async def test_a_one_shot_cut_by_shutdown_and_started_again_too_late_ends_interrupted(
    registry, home, db
):
    once = await add_job(registry, home, "in 1m")
    due = once.next_run_at
    fence = (await db.write(claim_due, "A", due, LEASE, UTC)).claims[0].fence
    assert await db.write(interrupt, once.id, fence, Cause.SHUTDOWN, SHUT_DOWN, due + 5)
    report = await db.write(claim_due, "B", due + 3 * 3600, LEASE, UTC)  # down for 3 hours
    assert report.retired == [once.id] and report.claims == []
    final = await db.read(get_job, once.id)
    assert final.state == "interrupted"
    assert final.retired_reason == "interrupted, then missed by 180 minutes; not fired this late"


async def test_a_one_shot_fired_by_hand_and_interrupted_is_never_stranded(registry, home, db):
    """`cron run` before its time: an interruption leaves its schedule alone. A hand fire
    still running when its time came (that occurrence was skipped): it was the job's
    fire, so an interruption makes it due again, as a scheduled fire's would."""
    early = await add_job(registry, home, "in 10m", name="early")
    fence = (await db.write(claim_now, early.id, "cli", now(), LEASE, None)).fence
    assert await db.write(interrupt, early.id, fence, Cause.SHUTDOWN, "got SIGINT", now())
    kept = await db.read(get_job, early.id)
    assert (kept.state, kept.next_run_at) == ("scheduled", early.next_run_at)

    over = await add_job(registry, home, "in 10m", name="over")
    due = over.next_run_at
    fence = (await db.write(claim_now, over.id, "cli", due - 5, 3600.0, None)).fence
    skipped = await db.write(claim_due, "serve", due, LEASE, UTC)
    assert skipped.skipped == [over.id]  # its time came while the hand fire ran
    assert (await db.read(get_job, over.id)).next_run_at is None
    assert await db.write(interrupt, over.id, fence, Cause.SHUTDOWN, "got SIGINT", due + 5)
    retry = await db.write(claim_due, "serve", due + 6, LEASE, UTC)
    assert [c.job.id for c in retry.claims] == [over.id]


# -- the time zone ----------------------------------------------------------------------


def wall(at: float, tz: ZoneInfo) -> str:
    return datetime.fromtimestamp(at, tz).strftime("%Y-%m-%d %H:%M")


async def test_a_daily_job_follows_a_new_zone_across_a_restart(registry, home, io_clock):
    """Made under UTC (due 18:07 UTC); serve restarts on Los Angeles: it fires at 18:07
    in Los Angeles that day, once, and not at 18:07 UTC."""
    job = await add_job(registry, home, "every day at 18:07")
    slot = wall(job.next_run_at, UTC)
    assert slot.endswith(" 18:07") and job.zone == "UTC"
    runner = Runner()
    sched = make_scheduler(home, registry, runner, LA)
    async with scheduling(sched):
        await wait_runs(runner, 1)
        await settle(sched)
    ((fired_at, _),) = runner.prompts
    assert wall(T0 + fired_at, LA) == slot  # 8 hours after 18:07 UTC
    runs, final = await history(registry, home, job.id)
    assert [r.status for r in runs] == ["ok"]
    assert (final.next_run_at - (T0 + fired_at), final.zone) == (86400, LA.key)
    assert final.to_dict()["zone"] == LA.key


async def test_moving_zones_fires_no_slot_twice_and_skips_none_ahead(registry, home, db):
    daily = await add_job(registry, home, "every day at 18:07", name="daily")
    halfhourly = await add_job(registry, home, "every 30m", name="halfhourly")
    interval = await add_job(registry, home, "every 45m", name="interval")
    # serve was down past 18:07 UTC (its run missed) and comes back at 20:00 UTC on LA:
    # the missed UTC slot is not caught up now; the day's run is 18:07 in LA, later today
    back = daily.next_run_at + 53 * 60 + 3600
    moved = await db.write(rezone, LA, back)
    assert sorted(moved) == sorted([daily.id, halfhourly.id])
    slot = wall(daily.next_run_at, UTC)  # the day's 18:07
    assert wall((await db.read(get_job, daily.id)).next_run_at, LA) == slot
    # "every 30m" keeps its pace: its next run stays where it was (now in the new zone)
    moved_30m = await db.read(get_job, halfhourly.id)
    assert (moved_30m.next_run_at, moved_30m.zone) == (halfhourly.next_run_at, LA.key)
    # an interval is no wall-clock schedule: no zone, never moved
    assert (await db.read(get_job, interval.id)).zone is None
    report = await db.write(claim_due, "A", back, LEASE, LA)
    assert sorted(c.job.id for c in report.claims) == sorted([halfhourly.id, interval.id])
    # a second start on the same zone moves nothing
    assert await db.write(rezone, LA, back) == []


# -- waking up ----------------------------------------------------------------------------


@pytest.mark.parametrize(("watch", "fired_at"), [(None, 600.0), (30.0, 360.0)])
async def test_another_writers_change_is_seen_only_when_watched(
    registry, home, io_clock, watch, fired_at
):
    """No polling: a job another process adds without telling serve is found at the
    scheduler's next look (here its next due job, at 10 minutes), unless it watches other
    writers (a second serve with --no-lock), which looks every `watch` seconds."""
    start = trio.current_time()
    await add_job(registry, home, "in 10m", name="later")
    runner = Runner()
    sched = make_scheduler(home, registry, runner, watch_other_writers=watch)
    async with scheduling(sched) as address:
        await trio.sleep(300)  # five minutes in, another process adds a job due at 6 min
        await add_job(registry, home, "in 1m", name="sooner")
        await wait_runs(runner, 1)
        await settle(sched)
        await address.cast(JobsChanged())
    assert runner.prompts[0][0] - start == pytest.approx(fired_at, abs=1)
