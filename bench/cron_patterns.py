"""The per-job baseline of bench/cron.py, in a module of its own: a write
function travels to the writer's process by module and name, and that process
does not run the benchmark's __main__."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import apsw

from hermes.cron.jobs import JOB_SELECT, Job, job_from_row
from hermes.cron.schedule import Schedule, next_after

UTC = ZoneInfo("UTC")


def claim_one(conn: apsw.Connection, job_id: str, owner: str, now: float) -> None:
    """The per-job pattern: one job read, claimed, advanced and recorded."""
    job: Job = job_from_row(conn.execute(f"{JOB_SELECT} WHERE id = ?", (job_id,)).fetchone())
    schedule = Schedule.from_text(job.schedule, job.schedule_display)
    nxt = next_after(schedule, now, UTC)
    fence = job.fence + 1
    conn.execute(
        "UPDATE cron_jobs SET fence = ?, running_fence = ?, lease_owner = ?, lease_expires_at = ?,"
        " next_run_at = ? WHERE id = ? AND fence = ?",
        (fence, fence, owner, now + 60, nxt, job.id, job.fence),
    )
    conn.execute(
        "INSERT INTO cron_runs (job_id, fence, owner, due_at, started_at, status)"
        " VALUES (?, ?, ?, ?, ?, 'running')",
        (job.id, fence, owner, job.next_run_at, now),
    )
