"""The job store: jobs and their run history in state.db.

Every function takes a connection and runs inside the writer's batch (`await
db.write(claim_now, ...)`) or a read. The store finds, lists and resolves jobs and
records what is not a state of theirs (a run's targets); every change of a job's
or a run's state is a transition of hermes.cron.lifecycle, which the functions
here call after resolving the job.
"""

from __future__ import annotations

import secrets
from zoneinfo import ZoneInfo

import apsw
import attrs

from hermes.actors.errors import Invalid, NotFound, Unavailable
from hermes.config import Role
from hermes.cron.injection import check as injection_check
from hermes.cron.jobs import JOB_SELECT, RUN_SELECT, Job, Run, job_from_row
from hermes.cron.lifecycle import (
    EXPIRED,
    LIVE,
    Cause,
    Claim,
    JobState,
    cancel,
    claim,
    interrupt,
    pause,
    reschedule,
    resume,
)
from hermes.cron.schedule import Schedule, next_after, zone_of
from hermes.delivery.targets import Origin, PlannedTarget


class JobError(Invalid):
    """A job request that cannot be done: a bad field, a job in the wrong state."""


class JobNotFound(JobError, NotFound):
    """No job has that id or name."""


class JobBusy(Unavailable):
    """Not now: the job is running, or the scheduler is stopping; later it may be done."""


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
    skills: tuple[str, ...] = ()  # loaded into each fire's prompt (names, checked by the caller)


def new_job_id() -> str:
    return secrets.token_hex(6)


def create_job(conn: apsw.Connection, new: NewJob, now: float, tz: ZoneInfo) -> Job:
    """A new job, scheduled from now."""
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
        " created_at, next_run_at, role, state, zone, skills)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
            JobState.SCHEDULED,
            zone_of(new.schedule, tz),
            " ".join(new.skills) or None,
        ),
    )
    return get_job(conn, job_id)


def get_job(conn: apsw.Connection, job_id: str) -> Job | None:
    row = conn.execute(f"{JOB_SELECT} WHERE id = ?", (job_id,)).fetchone()
    return job_from_row(row) if row else None


def _job(conn: apsw.Connection, job_id: str) -> Job:
    job = get_job(conn, job_id)
    if job is None:
        raise JobNotFound(f"no cron job {job_id!r}")
    return job


def list_jobs(conn: apsw.Connection, include_all: bool = False) -> list[Job]:
    """Scheduled and paused jobs; with `include_all`, ended ones too."""
    where = "" if include_all else f"WHERE state IN ({', '.join('?' * len(LIVE))})"
    args = () if include_all else LIVE
    rows = conn.execute(
        f"{JOB_SELECT} {where} ORDER BY next_run_at IS NULL, next_run_at, name", args
    )
    return [job_from_row(r) for r in rows]


def resolve_job(conn: apsw.Connection, ref: str) -> Job:
    """A job by id or by unique name; an ambiguous name lists the candidates."""
    job = get_job(conn, ref)
    if job is not None:
        return job
    rows = [job_from_row(r) for r in conn.execute(f"{JOB_SELECT} WHERE name = ?", (ref,))]
    if not rows:
        raise JobNotFound(f"no cron job with id or name {ref!r}")
    if len(rows) > 1:
        names = ", ".join(f"{j.id} ({j.schedule_display})" for j in rows)
        raise JobError(f"the name {ref!r} is ambiguous; use one of these ids: {names}")
    return rows[0]


def update_job(conn: apsw.Connection, job_id: str, now: float, tz: ZoneInfo, **fields) -> Job:
    """Change a job's fields; a new schedule recomputes its next run (and gives a job
    that had ended a new life: lifecycle.reschedule)."""
    allowed = {
        "name",
        "prompt",
        "script",
        "no_agent",
        "deliver",
        "workdir",
        "repeat_times",
        "attach_to_session",
        "catch_up",
        "skills",
    }
    unknown = set(fields) - allowed - {"schedule"}
    if unknown:
        raise JobError(f"cannot edit {', '.join(sorted(unknown))}")
    job = _job(conn, job_id)
    injection_check(fields.get("prompt"), "prompt")
    if "schedule" in fields:
        reschedule(conn, job, fields.pop("schedule"), now, tz)
    if "skills" in fields:
        fields["skills"] = " ".join(fields["skills"]) or None
    sets = [f"{name} = ?" for name in fields]
    args = [int(v) if isinstance(v, bool) else v for v in fields.values()]
    if sets:
        conn.execute(f"UPDATE cron_jobs SET {', '.join(sets)} WHERE id = ?", (*args, job_id))
    return get_job(conn, job_id)


def set_paused(conn: apsw.Connection, job_id: str, paused: bool, now: float, tz: ZoneInfo) -> Job:
    """Pause a scheduled job, or resume a paused one (pausing a paused job, or resuming a
    scheduled one, changes nothing); a job that has ended is refused."""
    job = _job(conn, job_id)
    if job.state == (JobState.PAUSED if paused else JobState.SCHEDULED):
        return job
    done = pause(conn, job.id) if paused else resume(conn, job, now, tz)
    if not done:
        why = f" ({job.retired_reason})" if job.retired_reason else ""
        raise JobError(
            f"job {job.id} has ended: {job.state}{why}; give it a new schedule"
            f" (hermes cron edit {job.id} --schedule ...) to run it again"
        )
    return get_job(conn, job.id)


def remove_job(conn: apsw.Connection, job_id: str) -> None:
    conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,))
    if conn.changes() == 0:
        raise JobNotFound(f"no cron job {job_id!r}")


def earliest_due(conn: apsw.Connection) -> float | None:
    """When the scheduler must look next: the earliest next run, or the earliest
    lease of a running fire to run out (its worker may have died)."""
    return conn.execute(
        "SELECT min(t) FROM (SELECT min(next_run_at) AS t FROM cron_jobs WHERE state = ?"
        " UNION ALL SELECT min(lease_expires_at) FROM cron_jobs WHERE running_fence IS NOT NULL)",
        (JobState.SCHEDULED,),
    ).get


def claim_now(
    conn: apsw.Connection, ref: str, owner: str, now: float, lease: float, context: str | None
) -> Claim:
    """Claim a job for an immediate fire (`cron run`); its schedule is untouched."""
    injection_check(context, "run context")
    job = resolve_job(conn, ref)
    if job.fire_running(now):
        raise JobBusy(f"job {job.id} is running now (run {job.running_fence})")
    if job.running_fence is not None:  # its worker died: that fire is interrupted first
        interrupt(conn, job.id, job.running_fence, Cause.LEASE, EXPIRED, now)
        job = _job(conn, job.id)
    fence = claim(conn, job, owner, now, lease, job.next_run_at, job.zone, None, context)
    if fence is None:
        raise JobError(f"job {job.id} changed under the claim; try again")
    return Claim(job, fence, None, owner, context)


def holds_lease(conn: apsw.Connection, job_id: str, fence: int, owner: str) -> bool:
    """Whether the fire still owns its job (a read: cheap enough to ask every second)."""
    row = conn.execute(
        "SELECT 1 FROM cron_jobs WHERE id = ? AND running_fence = ? AND lease_owner = ?",
        (job_id, fence, owner),
    ).fetchone()
    return row is not None


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
        (
            job_id,
            fence,
            t.platform,
            t.chat_id,
            t.thread_id,
            planned.provenance,
            int(planned.mirror),
            status,
            note,
            now,
            outbox_key,
        ),
    )


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
        TargetRecord(
            fence,
            ":".join(p for p in (platform, chat, thread) if p),
            provenance,
            bool(mirror),
            status,
            note,
            key,
        )
        for fence, platform, chat, thread, provenance, mirror, status, note, key in rows
    ]


def cancel_job(conn: apsw.Connection, ref: str, now: float) -> Job:
    """Cancel the job's running fire (lifecycle.cancel): its lease is revoked, which its
    worker's lease watch sees, wherever it runs, and kills the fire."""
    job = resolve_job(conn, ref)
    if job.running_fence is None or not cancel(conn, job.id, job.running_fence, now):
        raise JobError(f"job {job.id} is not running")
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
