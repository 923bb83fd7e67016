"""The job store on a real state.db: claims, leases, fencing, grace, catch-up, retirement."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from hermes.actors.errors import Invalid, Unavailable
from hermes.cron.lifecycle import (
    EXPIRED,
    SHUT_DOWN,
    Cause,
    claim_due,
    finish_fire,
    heartbeat,
    interrupt,
)
from hermes.cron.schedule import Schedule, parse_schedule
from hermes.cron.store import (
    JobBusy,
    JobError,
    NewJob,
    cancel_job,
    claim_now,
    create_job,
    get_job,
    resolve_job,
    run_history,
)
from hermes.state.db import Db

UTC = ZoneInfo("UTC")
T0 = 1_800_000_000.0  # a fixed wall-clock moment (2027-01-15 08:00 UTC)
LEASE = 60.0


@pytest.fixture
async def db(registry, db_path):
    async with Db(registry, db_path) as gen:
        yield gen


async def add(db, text="every 10m", now=T0, **kw):
    schedule = parse_schedule(text, UTC, now)
    return await db.write(
        create_job, NewJob(kw.pop("name", text), schedule, prompt="p", **kw), now, UTC
    )


async def test_claim_is_exclusive_and_advances_next_run(db):
    job = await add(db)
    due = job.next_run_at
    first = await db.write(claim_due, "A", due + 1, LEASE, UTC)
    second = await db.write(claim_due, "B", due + 1, LEASE, UTC)
    assert [c.job.id for c in first.claims] == [job.id]
    assert second.claims == []
    claimed = await db.read(get_job, job.id)
    assert claimed.lease_owner == "A" and claimed.fence == first.claims[0].fence == 1
    assert claimed.next_run_at == due + 600
    assert [r.status for r in await db.read(run_history, job.id)] == ["running"]


async def test_heartbeat_renews_only_the_owners_lease(db):
    job = await add(db)
    claim = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    assert await db.write(heartbeat, job.id, claim.fence, "A", job.next_run_at + 30, LEASE)
    renewed = await db.read(get_job, job.id)
    assert renewed.lease_expires_at == job.next_run_at + 30 + LEASE
    assert not await db.write(heartbeat, job.id, claim.fence, "B", job.next_run_at + 31, LEASE)
    assert not await db.write(heartbeat, job.id, claim.fence + 1, "A", job.next_run_at + 31, LEASE)


async def test_stale_worker_result_is_refused_and_newer_record_stands(db):
    job = await add(db, "every 1m")
    old = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    # A stalls; its lease runs out; the next occurrence is claimed by B
    later = job.next_run_at + 60 + LEASE + 1
    new = (await db.write(claim_due, "B", later, LEASE, UTC)).claims[0]
    assert new.fence == old.fence + 1
    assert await db.write(finish_fire, job.id, new.fence, "ok", later + 5) == 0
    refused = await db.write(finish_fire, job.id, old.fence, "error", later + 6, "late failure")
    assert refused is None
    final = await db.read(get_job, job.id)
    assert (final.last_status, final.failure_streak, final.last_error) == ("ok", 0, None)
    runs = {r.fence: (r.status, r.error) for r in await db.read(run_history, job.id)}
    # the old run keeps what was recorded when its lease was found expired
    assert runs == {old.fence: ("interrupted", EXPIRED), new.fence: ("ok", None)}


async def test_an_expired_lease_is_recorded_when_noticed_not_at_the_next_due(db):
    job = await add(db, "every 1h")
    claim = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    # A dies; the next planning pass after its lease ran out notices, long before the next run
    noticed = job.next_run_at + LEASE + 1
    report = await db.write(claim_due, "B", noticed, LEASE, UTC)
    assert report.claims == []
    (run,) = await db.read(run_history, job.id)
    assert (run.fence, run.status, run.error) == (claim.fence, "interrupted", EXPIRED)
    assert (await db.read(get_job, job.id)).running_fence is None


async def test_a_cancelled_fires_late_result_is_refused(db):
    job = await add(db, "every 1h")
    claim = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    await db.write(cancel_job, job.id, job.next_run_at + 1)
    late = await db.write(finish_fire, job.id, claim.fence, "ok", job.next_run_at + 2)
    assert late is None
    (run,) = await db.read(run_history, job.id)
    assert (run.status, run.error) == ("cancelled", None)  # the cancel stands
    assert (await db.read(get_job, job.id)).last_status == "cancelled"


async def test_overlap_skips_while_the_previous_fire_runs(db):
    job = await add(db, "every 1m")
    claim = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    # still running (lease renewed) when the next occurrence comes due
    await db.write(heartbeat, job.id, claim.fence, "A", job.next_run_at + 50, LEASE)
    report = await db.write(claim_due, "B", job.next_run_at + 61, LEASE, UTC)
    assert report.claims == [] and report.skipped == [job.id]
    assert (await db.read(get_job, job.id)).next_run_at == job.next_run_at + 120
    statuses = [r.status for r in await db.read(run_history, job.id)]
    assert statuses == ["skipped", "running"]


async def test_within_grace_fires_late_beyond_it_catches_up_once(db):
    job = await add(db, "every 1h")  # grace: 30 minutes
    late = await db.write(claim_due, "A", job.next_run_at + 20 * 60, LEASE, UTC)
    assert late.claims[0].catch_up is False
    await db.write(finish_fire, job.id, late.claims[0].fence, "ok", job.next_run_at + 21 * 60)
    # down for five hours: one catch-up fire, next run fast-forwarded
    back = job.next_run_at + 5 * 3600 + 10
    report = await db.write(claim_due, "A", back, LEASE, UTC)
    assert len(report.claims) == 1 and report.claims[0].catch_up
    assert (await db.read(get_job, job.id)).next_run_at == job.next_run_at + 6 * 3600


async def test_catch_up_off_skips_the_missed_run(db):
    job = await add(db, "every 1h", catch_up=False)
    report = await db.write(claim_due, "A", job.next_run_at + 3 * 3600 + 10, LEASE, UTC)
    assert report.claims == [] and report.skipped == [job.id]
    assert [r.status for r in await db.read(run_history, job.id)] == ["missed"]
    # the global default applies when the job has no setting of its own
    other = await add(db, "every 1h", name="defaulted")
    off = await db.write(claim_due, "A", other.next_run_at + 3 * 3600 + 10, LEASE, UTC, False)
    assert off.claims == []


async def test_far_past_due_one_shot_is_retired_not_fired(db):
    soon = await add(db, "in 10m", name="soon")
    report = await db.write(claim_due, "A", soon.next_run_at + 3 * 3600, LEASE, UTC)
    assert report.retired == [soon.id] and report.claims == []
    retired = await db.read(get_job, soon.id)
    assert retired.state == "completed" and "missed by 180 minutes" in retired.retired_reason
    # a one-shot within its grace fires, and completes
    once = await add(db, "in 10m", name="once", now=T0 + 10_000)
    fire = (await db.write(claim_due, "A", once.next_run_at + 60, LEASE, UTC)).claims[0]
    await db.write(finish_fire, once.id, fire.fence, "ok", once.next_run_at + 70)
    done = await db.read(get_job, once.id)
    assert (done.state, done.next_run_at) == ("completed", None)


async def test_interruption_is_recorded_against_its_own_execution(db):
    job = await add(db, "every 1m")
    first = (await db.write(claim_due, "A", job.next_run_at, LEASE, UTC)).claims[0]
    await db.write(finish_fire, job.id, first.fence, "ok", job.next_run_at + 1)
    second = (await db.write(claim_due, "A", job.next_run_at + 60, LEASE, UTC)).claims[0]
    # an interruption recorded late for the first execution changes nothing of the second
    stale = await db.write(
        interrupt, job.id, first.fence, Cause.SHUTDOWN, SHUT_DOWN, job.next_run_at + 61
    )
    assert stale is False
    runs = {r.fence: r.status for r in await db.read(run_history, job.id)}
    assert runs == {first.fence: "ok", second.fence: "running"}
    ours = await db.write(
        interrupt, job.id, second.fence, Cause.SHUTDOWN, SHUT_DOWN, job.next_run_at + 62
    )
    assert ours is True
    runs = {r.fence: r.status for r in await db.read(run_history, job.id)}
    assert runs == {first.fence: "ok", second.fence: "interrupted"}
    assert (await db.read(get_job, job.id)).last_status == "interrupted"


async def test_failure_streak_counts_and_resets(db):
    job = await add(db, "every 1m")
    t = job.next_run_at
    streaks = []
    for status in ("error", "error", "error", "ok", "error"):
        claim = (await db.write(claim_due, "A", t, LEASE, UTC)).claims[0]
        streaks.append(await db.write(finish_fire, job.id, claim.fence, status, t + 1))
        t += 60
    assert streaks == [1, 2, 3, 0, 1]


async def test_jobs_by_id_or_unique_name(db):
    a = await add(db, "every 1m", name="brief")
    assert (await db.read(resolve_job, "brief")).id == a.id
    b = await add(db, "every 2m", name="brief")
    with pytest.raises(JobError, match="ambiguous") as info:
        await db.read(resolve_job, "brief")
    assert a.id in str(info.value) and b.id in str(info.value)
    with pytest.raises(JobError, match="no cron job"):
        await db.read(resolve_job, "nothing")


async def test_creation_refusals(db):
    every = Schedule("interval", "every 1m", seconds=60)
    with pytest.raises(JobError, match="needs a script"):
        await db.write(create_job, NewJob("x", every, prompt="p", no_agent=True), T0, UTC)
    with pytest.raises(JobError, match="prompt or a script"):
        await db.write(create_job, NewJob("x", every, prompt="  "), T0, UTC)


async def test_firing_a_job_that_runs_now_is_busy_not_a_bad_request(db):
    """Later it may work: Unavailable (exit 75, HTTP 503), not Invalid."""
    job = await add(db)
    await db.write(claim_now, job.id, "A", T0, LEASE, None)
    with pytest.raises(JobBusy, match=f"job {job.id} is running now") as busy:
        await db.write(claim_now, job.id, "B", T0 + 1, LEASE, None)
    assert isinstance(busy.value, Unavailable) and not isinstance(busy.value, Invalid)
