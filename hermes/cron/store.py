"""The job store: jobs and run history in state.db, written through the DbWriter.

Every function takes a connection; writes run inside the writer's batch
(`await db.write(claim_due, ...)`), so a claim, its run record and the job's
next run commit together. Every terminal write of a fire is conditioned on
its fencing token: a stale worker's write changes nothing and says so.
"""

from __future__ import annotations

import secrets
from zoneinfo import ZoneInfo

import apsw
import attrs

from hermes.config import Role
from hermes.cron.injection import check as injection_check
from hermes.cron.jobs import JOB_SELECT, RUN_SELECT, Job, Run, job_from_row
from hermes.cron.schedule import GRACE_MIN, ONE_SHOT_GRACE, Schedule, grace, next_after
from hermes.delivery.targets import Origin, PlannedTarget


class JobError(Exception):
    """A job request that cannot be done: unknown or ambiguous job, bad fields."""


@attrs.frozen
class NewJob:
    name: str
    schedule: Schedule
    prompt: str | None = None
    script: str | None = None
    no_agent: bool = False
    repeat_times: int | None = None
    deliver: str = "local"
    origin: Origin | None = None
    attach_to_session: bool | None = None
    catch_up: bool | None = None
    workdir: str | None = None
    model: str | None = None
    provider: str | None = None
    role: Role = "owner"  # its maker's: a chat user's job runs with a user's tools


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


def new_job_id() -> str:
    return secrets.token_hex(6)


def create_job(conn: apsw.Connection, new: NewJob, now: float, tz: ZoneInfo) -> Job:
    if new.no_agent and not new.script:
        raise JobError("a no_agent job needs a script")
    if not (new.prompt or "").strip() and not new.script:
        raise JobError("a job needs a prompt or a script")
    injection_check(new.prompt, "prompt")
    first = next_after(new.schedule, now, tz) if new.schedule.kind != "once" else new.schedule.at
    job_id = new_job_id()
    conn.execute(
        "INSERT INTO cron_jobs (id, name, prompt, script, no_agent, schedule, schedule_display,"
        " repeat_times, deliver, origin, attach_to_session, catch_up, workdir, model, provider,"
        " created_at, next_run_at, role) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            job_id,
            new.name,
            new.prompt,
            new.script,
            int(new.no_agent),
            new.schedule.to_text(),
            new.schedule.display,
            new.repeat_times,
            new.deliver,
            new.origin.to_json() if new.origin else None,
            None if new.attach_to_session is None else int(new.attach_to_session),
            None if new.catch_up is None else int(new.catch_up),
            new.workdir,
            new.model,
            new.provider,
            now,
            first,
            new.role,
        ),
    )
    return get_job(conn, job_id)


def get_job(conn: apsw.Connection, job_id: str) -> Job | None:
    row = conn.execute(f"{JOB_SELECT} WHERE id = ?", (job_id,)).fetchone()
    return job_from_row(row) if row else None


def list_jobs(conn: apsw.Connection, include_all: bool = False) -> list[Job]:
    where = "" if include_all else "WHERE state IN ('scheduled', 'paused')"
    rows = conn.execute(f"{JOB_SELECT} {where} ORDER BY next_run_at IS NULL, next_run_at, name")
    return [job_from_row(r) for r in rows]


def resolve_job(conn: apsw.Connection, ref: str) -> Job:
    """A job by id or by unique name; an ambiguous name lists the candidates."""
    job = get_job(conn, ref)
    if job is not None:
        return job
    rows = [job_from_row(r) for r in conn.execute(f"{JOB_SELECT} WHERE name = ?", (ref,))]
    if not rows:
        raise JobError(f"no cron job with id or name {ref!r}")
    if len(rows) > 1:
        names = ", ".join(f"{j.id} ({j.schedule_display})" for j in rows)
        raise JobError(f"the name {ref!r} is ambiguous; use one of these ids: {names}")
    return rows[0]


def update_job(conn: apsw.Connection, job_id: str, now: float, tz: ZoneInfo, **fields) -> Job:
    """Change a job's fields; a new schedule recomputes its next run."""
    allowed = {"name", "prompt", "script", "no_agent", "deliver", "workdir", "repeat_times",
               "attach_to_session", "catch_up"}  # fmt: skip
    unknown = set(fields) - allowed - {"schedule"}
    if unknown:
        raise JobError(f"cannot edit {', '.join(sorted(unknown))}")
    job = get_job(conn, job_id)
    if job is None:
        raise JobError(f"no cron job {job_id!r}")
    injection_check(fields.get("prompt"), "prompt")
    sets, args = [], []
    if "schedule" in fields:
        schedule: Schedule = fields.pop("schedule")
        first = schedule.at if schedule.kind == "once" else next_after(schedule, now, tz)
        sets += ["schedule = ?", "schedule_display = ?", "next_run_at = ?"]
        args += [schedule.to_text(), schedule.display, first]
    for name, value in fields.items():
        sets.append(f"{name} = ?")
        args.append(int(value) if isinstance(value, bool) else value)
    if sets:
        conn.execute(f"UPDATE cron_jobs SET {', '.join(sets)} WHERE id = ?", (*args, job_id))
    return get_job(conn, job_id)


def set_paused(conn: apsw.Connection, job_id: str, paused: bool, now: float, tz: ZoneInfo) -> Job:
    job = get_job(conn, job_id)
    if job is None:
        raise JobError(f"no cron job {job_id!r}")
    if paused:
        conn.execute("UPDATE cron_jobs SET state = 'paused' WHERE id = ?", (job_id,))
    else:
        schedule = Schedule.from_text(job.schedule, job.schedule_display)
        nxt = schedule.at if schedule.kind == "once" else next_after(schedule, now, tz)
        conn.execute(
            "UPDATE cron_jobs SET state = 'scheduled', next_run_at = ? WHERE id = ?",
            (nxt, job_id),
        )
    return get_job(conn, job_id)


def remove_job(conn: apsw.Connection, job_id: str) -> None:
    conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,))
    if conn.changes() == 0:
        raise JobError(f"no cron job {job_id!r}")


def earliest_due(conn: apsw.Connection) -> float | None:
    """When the scheduler must look next: the earliest next run, or the earliest
    lease of a running fire to run out (its worker may have died)."""
    return conn.execute(
        "SELECT min(t) FROM (SELECT min(next_run_at) AS t FROM cron_jobs WHERE state = 'scheduled'"
        " UNION ALL SELECT min(lease_expires_at) FROM cron_jobs WHERE running_fence IS NOT NULL)"
    ).get


def _insert_run(conn, job_id, fence, owner, due_at, now, status, error=None, context=None):
    conn.execute(
        "INSERT INTO cron_runs (job_id, fence, owner, due_at, started_at, finished_at, status,"
        " error, run_context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (job_id, fence, owner, due_at, now, None if status == "running" else now, status, error,
         context),
    )  # fmt: skip


def _take(conn: apsw.Connection, job: Job, owner: str, now: float, lease: float, nxt) -> int:
    """Claim the job: a new fence, the lease, and its next run, in the caller's transaction."""
    if job.running_fence is not None:
        # The fire that held it lost its lease (its owner died): record that on its own token.
        record_interrupted(conn, job.id, job.running_fence, EXPIRED, now)
    fence = job.fence + 1
    conn.execute(
        "UPDATE cron_jobs SET fence = ?, running_fence = ?, lease_owner = ?,"
        " lease_expires_at = ?, next_run_at = ? WHERE id = ? AND fence = ?",
        (fence, fence, owner, now + lease, nxt, job.id, job.fence),
    )
    if conn.changes() != 1:
        raise JobError(f"job {job.id} changed under the claim")
    return fence


def _live_lease(job: Job, now: float) -> bool:
    return job.running_fence is not None and (job.lease_expires_at or 0) > now


EXPIRED = "lease expired: its worker stopped"


def expire_leases(conn: apsw.Connection, now: float) -> list[tuple[str, int]]:
    """Fires whose lease ran out (their worker died): recorded as interrupted now,
    not when the job is next due. Returns (job id, fence) of each."""
    rows = conn.execute(
        "SELECT id, running_fence FROM cron_jobs WHERE running_fence IS NOT NULL"
        " AND lease_expires_at <= ?",
        (now,),
    ).fetchall()
    for job_id, fence in rows:
        record_interrupted(conn, job_id, fence, EXPIRED, now)
    return [(job_id, fence) for job_id, fence in rows]


def claim_due(
    conn: apsw.Connection,
    owner: str,
    now: float,
    lease: float,
    tz: ZoneInfo,
    catch_up_default: bool = True,
) -> ClaimReport:
    """Claim and advance every due job in one transaction (the writer's batch)."""
    claims, skipped, retired = [], [], []
    expired = expire_leases(conn, now)
    upcoming: dict[str, float | None] = {}  # jobs sharing a schedule share its next run
    rows = conn.execute(
        f"{JOB_SELECT} WHERE state = 'scheduled' AND next_run_at IS NOT NULL"
        " AND next_run_at <= ? ORDER BY next_run_at",
        (now,),
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
        if _live_lease(job, now):
            # overlap: the previous fire still runs; this occurrence is skipped
            conn.execute("UPDATE cron_jobs SET next_run_at = ? WHERE id = ?", (nxt, job.id))
            _insert_run(
                conn, job.id, None, owner, due, now, "skipped", "the previous run was still running"
            )
            skipped.append(job.id)
            continue
        if schedule.kind == "once" and late > ONE_SHOT_GRACE:
            reason = f"missed by {late / 60:.0f} minutes; not fired this late"
            conn.execute(
                "UPDATE cron_jobs SET state = 'completed', next_run_at = NULL,"
                " retired_reason = ?, last_status = 'skipped' WHERE id = ?",
                (reason, job.id),
            )
            _insert_run(conn, job.id, None, owner, due, now, "retired", reason)
            retired.append(job.id)
            continue
        catch_up = False
        # (late <= GRACE_MIN is within any job's grace: no need to work the period out)
        if schedule.kind != "once" and late > GRACE_MIN and late > grace(schedule, due, tz):
            wanted = job.catch_up if job.catch_up is not None else catch_up_default
            if not wanted:
                conn.execute("UPDATE cron_jobs SET next_run_at = ? WHERE id = ?", (nxt, job.id))
                _insert_run(
                    conn, job.id, None, owner, due, now, "missed", "beyond its grace window"
                )
                skipped.append(job.id)
                continue
            catch_up = True
        fence = _take(conn, job, owner, now, lease, nxt)
        _insert_run(conn, job.id, fence, owner, due, now, "running")
        claims.append(Claim(job, fence, due, owner, None, catch_up))
    return ClaimReport(claims, skipped, retired, expired)


def claim_now(
    conn: apsw.Connection, ref: str, owner: str, now: float, lease: float, context: str | None
) -> Claim:
    """Claim a job for an immediate fire (`cron run`); its schedule is untouched."""
    injection_check(context, "run context")
    job = resolve_job(conn, ref)
    if _live_lease(job, now):
        raise JobError(f"job {job.id} is running now (run {job.running_fence})")
    fence = _take(conn, job, owner, now, lease, job.next_run_at)
    _insert_run(conn, job.id, fence, owner, None, now, "running", context=context)
    return Claim(job, fence, None, owner, context)


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


def holds_lease(conn: apsw.Connection, job_id: str, fence: int, owner: str) -> bool:
    """Whether the fire still owns its job (a read: cheap enough to ask every second)."""
    row = conn.execute(
        "SELECT 1 FROM cron_jobs WHERE id = ? AND running_fence = ? AND lease_owner = ?",
        (job_id, fence, owner),
    ).fetchone()
    return row is not None


def finish_fire(
    conn: apsw.Connection,
    job_id: str,
    fence: int,
    status: str,
    now: float,
    error: str | None = None,
    output_path: str | None = None,
) -> int | None:
    """Record a fire's result if its token still owns the job; returns the new
    failure streak, or None when the write was refused as stale (a newer fire owns
    the job, or this one was cancelled: its run keeps what the cancel recorded)."""
    failed = status == "error"
    conn.execute(
        "UPDATE cron_jobs SET last_run_at = ?, last_status = ?, last_error = ?,"
        " failure_streak = CASE WHEN ? THEN failure_streak + 1 ELSE 0 END,"
        " repeat_completed = repeat_completed + 1,"
        " lease_owner = NULL, lease_expires_at = NULL, running_fence = NULL,"
        " state = CASE WHEN schedule LIKE 'at:%' THEN 'completed'"
        "   WHEN repeat_times IS NOT NULL AND repeat_completed + 1 >= repeat_times THEN 'completed'"
        "   ELSE state END,"
        " next_run_at = CASE WHEN schedule LIKE 'at:%' OR (repeat_times IS NOT NULL"
        "   AND repeat_completed + 1 >= repeat_times) THEN NULL ELSE next_run_at END"
        " WHERE id = ? AND fence = ? AND running_fence = ?",
        (now, status, error, failed, job_id, fence, fence),
    )
    if conn.changes() == 0:
        conn.execute(
            "UPDATE cron_runs SET status = 'stale', finished_at = ?,"
            " error = 'refused: a newer fire owns the job'"
            " WHERE job_id = ? AND fence = ? AND status = 'running'",
            (now, job_id, fence),
        )
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


def record_target(
    conn: apsw.Connection,
    job_id: str,
    fence: int,
    planned: PlannedTarget,
    outbox_key: str | None,
    status: str,
    note: str | None,
    now: float,
) -> None:
    """The run's record of one target: where, why (provenance), whether mirrored, and
    the outbox key of the rows that carry the brief there (their state is its outcome)."""
    t = planned.target
    conn.execute(
        "INSERT INTO cron_deliveries (job_id, fence, platform, chat_id, thread_id, provenance,"
        " mirror, metadata, text, status, error, created_at, outbox_key)"
        " VALUES (?,?,?,?,?,?,?,'{}','',?,?,?,?)",
        (job_id, fence, t.platform, t.chat_id, t.thread_id, planned.provenance,
         int(planned.mirror), status, note, now, outbox_key),
    )  # fmt: skip


@attrs.frozen
class TargetRecord:
    fence: int
    target: str
    provenance: str
    mirror: bool
    status: str  # queued (the outbox has it) | failed | unknown
    note: str | None
    outbox_key: str | None


def run_targets(conn: apsw.Connection, job_id: str) -> list[TargetRecord]:
    rows = conn.execute(
        "SELECT fence, platform, chat_id, thread_id, provenance, mirror, status, error,"
        " outbox_key FROM cron_deliveries WHERE job_id = ? ORDER BY id",
        (job_id,),
    )
    return [
        TargetRecord(fence, ":".join(p for p in (platform, chat, thread) if p), provenance,
                     bool(mirror), status, note, key)
        for fence, platform, chat, thread, provenance, mirror, status, note, key in rows
    ]  # fmt: skip


def record_interrupted(
    conn: apsw.Connection, job_id: str, fence: int, reason: str, now: float
) -> None:
    """Mark one execution interrupted, by its own token; never the job's next fire."""
    conn.execute(
        "UPDATE cron_runs SET status = 'interrupted', finished_at = ?, error = ?"
        " WHERE job_id = ? AND fence = ? AND status = 'running'",
        (now, reason, job_id, fence),
    )
    conn.execute(
        "UPDATE cron_jobs SET last_status = 'interrupted', last_error = ?, lease_owner = NULL,"
        " lease_expires_at = NULL, running_fence = NULL"
        " WHERE id = ? AND fence = ? AND running_fence = ?",
        (reason, job_id, fence, fence),
    )


def cancel_job(conn: apsw.Connection, ref: str, now: float) -> Job:
    """Revoke the running fire's lease; its heartbeat sees that and cancels the fire."""
    job = resolve_job(conn, ref)
    if job.running_fence is None:
        raise JobError(f"job {job.id} is not running")
    record_interrupted(conn, job.id, job.running_fence, "cancelled", now)
    return get_job(conn, job.id)


def run_history(conn: apsw.Connection, job_id: str, limit: int = 20) -> list[Run]:
    rows = conn.execute(f"{RUN_SELECT} WHERE job_id = ? ORDER BY id DESC LIMIT ?", (job_id, limit))
    return [Run(*r) for r in rows]


def prune_runs(conn: apsw.Connection, keep: int) -> int:
    """Forget each job's runs beyond its newest `keep`, never a run still running (its
    fire holds a lease, and runs skipped while it ran may outnumber `keep`); returns
    how many."""
    conn.execute(
        "DELETE FROM cron_runs WHERE status != 'running' AND id IN (SELECT id FROM"
        " (SELECT id, row_number() OVER (PARTITION BY job_id ORDER BY id DESC) AS newer"
        " FROM cron_runs) WHERE newer > ?)",
        (keep,),
    )
    return conn.changes()


def prune_deliveries(conn: apsw.Connection, before: float) -> int:
    """Forget runs' target records made before `before` (their outcome is the outbox
    rows' state, pruned on its own rule); returns how many."""
    conn.execute("DELETE FROM cron_deliveries WHERE created_at < ?", (before,))
    return conn.changes()
