"""A cron job's life: the states of a job and of a run, and every transition between them.

Each transition is one function here, and it is the one place that writes that
change (the store reads and resolves; the Scheduler and the fire decide when).
They take a connection and run inside the writer's batch. A transition of a fire
in flight (finish, interrupt, cancel, heartbeat) is fenced by the fire's token:
when a newer fire owns the job, or a cancel or an expiry came first, it changes
nothing of the job and says so (returns None or False) for the caller to report.

    scheduled ──pause──▶ paused ──resume──▶ scheduled
    scheduled ──claim──▶ (a fire running: running_fence set, the job stays scheduled)
      fire ──finish──▶ scheduled (next run), or completed (a one-shot; the repeat count)
      fire ──interrupt──▶ scheduled; a one-shot: due again once within its grace,
                          else interrupted (a second interruption, or past its grace)
      fire ──cancel──▶ scheduled; a one-shot: cancelled
      fire ──expire_leases (its worker died)──▶ as interrupt
    scheduled ──skip──▶ scheduled, its next run (overlap: skipped; past grace: missed)
    scheduled ──retire──▶ completed (a one-shot far past due, unfired), or interrupted
                          (the retry of an interrupted one-shot, far past due)
    scheduled ──rezone (the configured zone changed)──▶ scheduled, next run moved
    completed | cancelled | interrupted ──reschedule (a new schedule)──▶ scheduled

docs/jobs.md is the same table for users.
"""

from __future__ import annotations

from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import apsw
import attrs

from hermes.cron.jobs import JOB_SELECT, Job, job_from_row
from hermes.cron.schedule import (
    GRACE_MIN,
    ONE_SHOT_GRACE,
    Schedule,
    grace,
    next_after,
    same_wall_time,
    zone_of,
)


class JobState(StrEnum):
    SCHEDULED = "scheduled"  # waiting for its next run (a fire of it may be running)
    PAUSED = "paused"  # fires nothing until resumed
    COMPLETED = "completed"  # its last fire ran, or a one-shot was retired unfired
    CANCELLED = "cancelled"  # a one-shot whose fire was cancelled
    INTERRUPTED = "interrupted"  # a one-shot whose fire was interrupted, and not fired again


LIVE = (JobState.SCHEDULED, JobState.PAUSED)  # what `hermes cron list` shows without --all
ENDED = (JobState.COMPLETED, JobState.CANCELLED, JobState.INTERRUPTED)


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    INTERRUPTED = "interrupted"  # its worker stopped or died before its end
    CANCELLED = "cancelled"
    STALE = "stale"  # its result was refused: a newer fire owned the job
    SKIPPED = "skipped"  # not fired: the previous fire still ran
    MISSED = "missed"  # not fired: beyond its grace window, with catch-up off
    RETIRED = "retired"  # a one-shot far past due, not fired


class Cause(StrEnum):
    """Why a fire stopped before its end."""

    CANCELLED = "cancelled"  # someone cancelled it (`hermes cron cancel`)
    SHUTDOWN = "shutdown"  # its worker stopped on purpose (serve drained, a signal)
    LEASE = "lease"  # its worker lost its lease, or died and the lease ran out


EXPIRED = "lease expired: its worker stopped"
SHUT_DOWN = "interrupted: the gateway shut down"
LOST = "lost its lease (cancelled, or taken over)"
REFUSED = "refused: a newer fire owns the job"


@attrs.frozen
class Claim:
    """A fire this worker owns: `fence` is its execution token."""

    job: Job
    fence: int
    due_at: float | None
    owner: str
    run_context: str | None = None
    catch_up: bool = False


@attrs.frozen
class ClaimReport:
    claims: list[Claim]
    skipped: list[str]  # job ids whose occurrence was skipped (overlap, missed without catch-up)
    retired: list[str]  # one-shots retired unfired
    expired: list[tuple[str, int]] = attrs.field(factory=list)  # (job, fence) whose worker died


def _insert_run(conn, job_id, fence, owner, due_at, now, status, error=None, context=None):
    conn.execute(
        "INSERT INTO cron_runs (job_id, fence, owner, due_at, started_at, finished_at, status,"
        " error, run_context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job_id,
            fence,
            owner,
            due_at,
            now,
            None if status == RunStatus.RUNNING else now,
            status,
            error,
            context,
        ),
    )


# -- a fire -----------------------------------------------------------------------------


def claim(
    conn: apsw.Connection,
    job: Job,
    owner: str,
    now: float,
    lease: float,
    nxt: float | None,
    zone: str | None,
    due: float | None,
    context: str | None = None,
) -> int | None:
    """A fire starts: the next fence, the lease, the job's next run (computed in `zone`)
    and the run's record. None when the job is not as `job` says (claimed or changed
    meanwhile) or a fire of it still holds its lease (an expired one is interrupted
    first: `expire_leases`)."""
    fence = job.fence + 1
    conn.execute(
        "UPDATE cron_jobs SET fence = ?, running_fence = ?, lease_owner = ?,"
        " lease_expires_at = ?, next_run_at = ?, zone = ? WHERE id = ? AND fence = ?"
        " AND running_fence IS NULL",
        (fence, fence, owner, now + lease, nxt, zone, job.id, job.fence),
    )
    if conn.changes() != 1:
        return None
    _insert_run(conn, job.id, fence, owner, due, now, RunStatus.RUNNING, context=context)
    return fence


def heartbeat(
    conn: apsw.Connection, job_id: str, fence: int, owner: str, now: float, lease: float
) -> bool:
    """Renew the lease; False when it is no longer ours (cancelled, or taken by a newer fire)."""
    conn.execute(
        "UPDATE cron_jobs SET lease_expires_at = ? WHERE id = ? AND fence = ? AND lease_owner = ?"
        " AND running_fence = ?",
        (now + lease, job_id, fence, owner, fence),
    )
    return conn.changes() == 1


def finish_fire(
    conn: apsw.Connection,
    job_id: str,
    fence: int,
    status: str,
    now: float,
    error: str | None = None,
    output_path: str | None = None,
) -> int | None:
    """A fire ran to its end (ok or error): the run's result, the job's last status and
    failure streak (+1 on error, 0 on ok); a one-shot, or a job whose repeat count is
    reached, is completed. Returns the new streak, or None when refused as stale (the
    run is marked stale; one a cancel or an expiry recorded keeps what they wrote)."""
    if status not in (RunStatus.OK, RunStatus.ERROR):
        raise ValueError(f"a fire finishes ok or error, not {status!r}")
    last = (  # this fire was its last: a one-shot's, or the last of its repeat count
        "(schedule LIKE 'at:%' OR (repeat_times IS NOT NULL"
        " AND repeat_completed + 1 >= repeat_times))"
    )
    conn.execute(
        "UPDATE cron_jobs SET last_run_at = ?, last_status = ?, last_error = ?,"
        " failure_streak = CASE WHEN ? THEN failure_streak + 1 ELSE 0 END,"
        " repeat_completed = repeat_completed + 1,"
        " lease_owner = NULL, lease_expires_at = NULL, running_fence = NULL,"
        f" state = CASE WHEN {last} THEN ? ELSE state END,"
        f" next_run_at = CASE WHEN {last} THEN NULL ELSE next_run_at END"
        " WHERE id = ? AND fence = ? AND running_fence = ?",
        (now, status, error, status == RunStatus.ERROR, JobState.COMPLETED, job_id, fence, fence),
    )
    if conn.changes() == 0:
        _close_run(conn, job_id, fence, RunStatus.STALE, REFUSED, now)
        return None
    conn.execute(
        "UPDATE cron_runs SET status = ?, finished_at = ?, error = ?, output_path = ?"
        " WHERE job_id = ? AND fence = ?",
        (status, now, error, output_path, job_id, fence),
    )
    return conn.execute("SELECT failure_streak FROM cron_jobs WHERE id = ?", (job_id,)).get


def record_delivery(conn: apsw.Connection, job_id: str, fence: int, error: str | None) -> None:
    """A failed delivery marks the run and the job (fenced); it does not count as a failure."""
    conn.execute(
        "UPDATE cron_runs SET delivery_error = ? WHERE job_id = ? AND fence = ?",
        (error, job_id, fence),
    )
    if error is not None:
        conn.execute(
            "UPDATE cron_jobs SET last_delivery_error = ?,"
            " last_status = CASE WHEN last_status = 'ok' THEN 'delivery_failed'"
            "   ELSE last_status END"
            " WHERE id = ? AND fence = ?",
            (error, job_id, fence),
        )


def _owned(conn: apsw.Connection, job_id: str, fence: int) -> Job | None:
    """The job if the fire `fence` still owns it, else None (its write is stale)."""
    row = conn.execute(
        f"{JOB_SELECT} WHERE id = ? AND fence = ? AND running_fence = ?", (job_id, fence, fence)
    ).fetchone()
    return None if row is None else job_from_row(row)


def _release(conn: apsw.Connection, job_id: str, status: str, error: str | None) -> None:
    conn.execute(
        "UPDATE cron_jobs SET last_status = ?, last_error = ?, lease_owner = NULL,"
        " lease_expires_at = NULL, running_fence = NULL WHERE id = ?",
        (status, error, job_id),
    )


def _end(conn: apsw.Connection, job_id: str, state: JobState, reason: str) -> None:
    conn.execute(
        "UPDATE cron_jobs SET state = ?, next_run_at = NULL, retired_reason = ? WHERE id = ?",
        (state, reason, job_id),
    )


def interrupt(
    conn: apsw.Connection, job_id: str, fence: int, cause: Cause, reason: str, now: float
) -> bool:
    """A fire stopped before its end, recorded on its own token (never the job's next
    fire). A recurring job waits for its next occurrence. A one-shot's fire is due again
    at once, the first time and within its grace window; a second interruption, or one
    past the window, ends it as interrupted with the reason. (A one-shot fired by hand,
    `cron run`, before its time keeps its schedule.) A cancel is `cancel`. False when
    stale."""
    if cause is Cause.CANCELLED:
        return cancel(conn, job_id, fence, now)
    job = _owned(conn, job_id, fence)
    if job is None:
        return False
    _close_run(conn, job_id, fence, RunStatus.INTERRUPTED, reason, now)
    _release(conn, job_id, RunStatus.INTERRUPTED, reason)
    if job.recurring or job.state in ENDED:
        return True
    due = conn.execute(
        "SELECT due_at FROM cron_runs WHERE job_id = ? AND fence = ?", (job_id, fence)
    ).get
    by_hand = due is None
    if by_hand:
        if job.next_run_at is not None:
            return True  # fired before its time: it still fires then
        due = Schedule.from_text(job.schedule, job.schedule_display).at  # its time came meanwhile
    if _interruptions(conn, job_id, due) + by_hand > 1:
        _end(conn, job_id, JobState.INTERRUPTED, f"interrupted twice; the last time: {reason}")
    elif now - due > ONE_SHOT_GRACE:
        _end(
            conn,
            job_id,
            JobState.INTERRUPTED,
            f"interrupted ({reason}) past its grace window; not fired again",
        )
    else:
        conn.execute("UPDATE cron_jobs SET next_run_at = ? WHERE id = ?", (due, job_id))
    return True


def _close_run(
    conn: apsw.Connection,
    job_id: str,
    fence: int,
    status: RunStatus,
    error: str | None,
    now: float,
) -> None:
    """The run of this fence, if it still runs, ends with `status` (and `error`)."""
    conn.execute(
        "UPDATE cron_runs SET status = ?, finished_at = ?, error = ?"
        " WHERE job_id = ? AND fence = ? AND status = ?",
        (status, now, error, job_id, fence, RunStatus.RUNNING),
    )


def _interruptions(conn: apsw.Connection, job_id: str, due: float) -> int:
    """How many fires of the occurrence due at `due` were interrupted."""
    return conn.execute(
        "SELECT count(*) FROM cron_runs WHERE job_id = ? AND due_at = ? AND status = ?",
        (job_id, due, RunStatus.INTERRUPTED),
    ).get


def cancel(conn: apsw.Connection, job_id: str, fence: int, now: float) -> bool:
    """A running fire is cancelled: its run says so, its lease is revoked (the worker's
    lease watch sees that and kills the fire). A recurring job waits for its next
    occurrence; a one-shot is finished as cancelled. False when stale."""
    job = _owned(conn, job_id, fence)
    if job is None:
        return False
    _close_run(conn, job_id, fence, RunStatus.CANCELLED, None, now)
    _release(conn, job_id, RunStatus.CANCELLED, None)
    if not job.recurring:
        _end(conn, job_id, JobState.CANCELLED, "its fire was cancelled")
    return True


def expire_leases(conn: apsw.Connection, now: float) -> list[tuple[str, int]]:
    """Fires whose lease ran out (their worker died) are interrupted now, not when the
    job is next due. Returns (job id, fence) of each."""
    rows = conn.execute(
        "SELECT id, running_fence FROM cron_jobs WHERE running_fence IS NOT NULL"
        " AND lease_expires_at <= ?",
        (now,),
    ).fetchall()
    for job_id, fence in rows:
        interrupt(conn, job_id, fence, Cause.LEASE, EXPIRED, now)
    return [(job_id, fence) for job_id, fence in rows]


# -- the schedule -----------------------------------------------------------------------


def skip(
    conn: apsw.Connection,
    job: Job,
    owner: str,
    due: float,
    now: float,
    nxt: float | None,
    zone: str | None,
    status: RunStatus,
    why: str,
) -> None:
    """An occurrence passes unfired (skipped: the last fire still runs; missed: beyond its
    grace with catch-up off): recorded, and the job moves to its next run."""
    conn.execute("UPDATE cron_jobs SET next_run_at = ?, zone = ? WHERE id = ?", (nxt, zone, job.id))
    _insert_run(conn, job.id, None, owner, due, now, status, why)


def retire(conn: apsw.Connection, job: Job, owner: str, due: float, now: float) -> None:
    """A one-shot far past due is not fired this late. It ends completed, or interrupted
    when this was the retry of an interrupted fire (serve was down past its grace)."""
    late = f"missed by {(now - due) / 60:.0f} minutes; not fired this late"
    if _interruptions(conn, job.id, due):
        _end(conn, job.id, JobState.INTERRUPTED, f"interrupted, then {late}")
    else:
        _end(conn, job.id, JobState.COMPLETED, late)
    conn.execute("UPDATE cron_jobs SET last_status = ? WHERE id = ?", (RunStatus.SKIPPED, job.id))
    _insert_run(conn, job.id, None, owner, due, now, RunStatus.RETIRED, late)


def pause(conn: apsw.Connection, job_id: str) -> bool:
    """scheduled → paused (a fire running now carries on); False unless it was scheduled."""
    conn.execute(
        "UPDATE cron_jobs SET state = ? WHERE id = ? AND state = ?",
        (JobState.PAUSED, job_id, JobState.SCHEDULED),
    )
    return conn.changes() == 1


def resume(conn: apsw.Connection, job: Job, now: float, tz: ZoneInfo) -> bool:
    """paused → scheduled, its next run counted from now (runs missed while paused are not
    caught up; a one-shot keeps its time). False unless it was paused."""
    schedule = Schedule.from_text(job.schedule, job.schedule_display)
    nxt = schedule.at if schedule.kind == "once" else next_after(schedule, now, tz)
    conn.execute(
        "UPDATE cron_jobs SET state = ?, next_run_at = ?, zone = ? WHERE id = ? AND state = ?",
        (JobState.SCHEDULED, nxt, zone_of(schedule, tz), job.id, JobState.PAUSED),
    )
    return conn.changes() == 1


def reschedule(
    conn: apsw.Connection, job: Job, schedule: Schedule, now: float, tz: ZoneInfo
) -> None:
    """A new schedule: its first run from now. A job that had ended starts a new life
    (scheduled, its repeat count from zero); a paused one stays paused."""
    first = schedule.at if schedule.kind == "once" else next_after(schedule, now, tz)
    conn.execute(
        "UPDATE cron_jobs SET schedule = ?, schedule_display = ?, next_run_at = ?, zone = ?"
        " WHERE id = ?",
        (schedule.to_text(), schedule.display, first, zone_of(schedule, tz), job.id),
    )
    if job.state in ENDED:
        conn.execute(
            "UPDATE cron_jobs SET state = ?, repeat_completed = 0, retired_reason = NULL"
            " WHERE id = ?",
            (JobState.SCHEDULED, job.id),
        )


# -- the scheduler's pass ---------------------------------------------------------------


def claim_due(
    conn: apsw.Connection,
    owner: str,
    now: float,
    lease: float,
    tz: ZoneInfo,
    catch_up_default: bool = True,
) -> ClaimReport:
    """Expire dead fires' leases, then claim and advance every due job, in one
    transaction (the writer's batch)."""
    claims, skipped, retired = [], [], []
    expired = expire_leases(conn, now)
    upcoming: dict[str, float | None] = {}  # jobs sharing a schedule share its next run
    rows = conn.execute(
        f"{JOB_SELECT} WHERE state = ? AND next_run_at IS NOT NULL AND next_run_at <= ?"
        " ORDER BY next_run_at",
        (JobState.SCHEDULED, now),
    )
    for job in [job_from_row(r) for r in rows]:
        schedule = Schedule.from_text(job.schedule, job.schedule_display)
        due = job.next_run_at
        late = now - due
        if schedule.kind == "once":
            nxt = None
        elif schedule.kind == "interval":
            nxt = due + schedule.seconds
            while nxt <= now:
                nxt += schedule.seconds
        else:
            if job.schedule not in upcoming:
                upcoming[job.schedule] = next_after(schedule, now, tz)
            nxt = upcoming[job.schedule]
        zone = zone_of(schedule, tz)
        if job.fire_running(now):
            skip(
                conn,
                job,
                owner,
                due,
                now,
                nxt,
                zone,
                RunStatus.SKIPPED,
                "the previous run was still running",
            )
            skipped.append(job.id)
            continue
        if schedule.kind == "once" and late > ONE_SHOT_GRACE:
            retire(conn, job, owner, due, now)
            retired.append(job.id)
            continue
        catch_up = False
        # (late <= GRACE_MIN is within any job's grace: no need to work the period out)
        if schedule.kind != "once" and late > GRACE_MIN and late > grace(schedule, due, tz):
            wanted = job.catch_up if job.catch_up is not None else catch_up_default
            if not wanted:
                skip(
                    conn,
                    job,
                    owner,
                    due,
                    now,
                    nxt,
                    zone,
                    RunStatus.MISSED,
                    "beyond its grace window",
                )
                skipped.append(job.id)
                continue
            catch_up = True
        fence = claim(conn, job, owner, now, lease, nxt, zone, due)
        if fence is not None:
            claims.append(Claim(job, fence, due, owner, None, catch_up))
    return ClaimReport(claims, skipped, retired, expired)


def rezone(conn: apsw.Connection, tz: ZoneInfo, now: float) -> list[str]:
    """Move each wall-clock job whose next run was computed in another zone onto `tz`
    (the configured zone changed across a restart), in one transaction; returns their
    ids. Occurrences are known by their wall-clock slot, and every slot before the old
    next run was fired or passed over in the old zone. The new next run is that slot
    in `tz` ("every day at 18:07" due Tuesday 18:07 UTC becomes Tuesday 18:07 in
    `tz`), so no slot fires twice and one still ahead is not skipped; but never later
    than the first run in `tz` from the old next run on (so "every 30m" keeps its
    pace), and when the slot has already passed in `tz`, that first run (due late or
    caught up by claim_due as any missed run). A row without a zone (written before
    zones were recorded) is taken to be `tz`'s and only stamped."""
    rows = conn.execute(
        "SELECT id, schedule, schedule_display, next_run_at, zone FROM cron_jobs"
        " WHERE schedule LIKE 'cron:%' AND next_run_at IS NOT NULL"
        " AND (zone IS NULL OR zone != ?)",
        (tz.key,),
    ).fetchall()
    moved = []
    for job_id, stored, display, nxt, zone in rows:
        try:
            old = ZoneInfo(zone) if zone else None
        except (ZoneInfoNotFoundError, ValueError):
            old = None  # a zone this machine no longer knows: as if unrecorded
        if old is not None:
            slot = same_wall_time(nxt, old, tz)
            first = next_after(Schedule.from_text(stored, display), nxt - 1, tz)
            nxt = min(slot, first) if slot >= now else first
            moved.append(job_id)
        conn.execute(
            "UPDATE cron_jobs SET next_run_at = ?, zone = ? WHERE id = ?", (nxt, tz.key, job_id)
        )
    return moved
