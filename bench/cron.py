"""Claiming due jobs in one transaction against one transaction per job; fire lateness.

Run: python bench/cron.py
- claim: 10,000 jobs in state.db with 1,000 due at once. hermes claims and
  advances the whole due set in one writer batch (`claim_due`); the baseline,
  measured in the same run on an identical copy, claims the same 1,000 jobs
  one transaction each (read the job, take the lease, advance it, record the run).
- lateness: 200 jobs due in the same second, fired by a real Scheduler on the
  real clock; lateness is the moment the fire starts minus its due time.
Last line: RESULT batch_ratio=<per-job time / batch time> lateness_p99_ms=<p99>
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import apsw
import trio

from hermes.cron.fire import FireContext
from hermes.cron.jobs import JOB_SELECT, Job, job_from_row
from hermes.cron.lifecycle import claim_due
from hermes.cron.schedule import Schedule, next_after
from hermes.cron.scheduler import JobsChanged, Scheduler
from hermes.cron.settings import CronConfig
from hermes.cron.store import NewJob, create_job
from hermes.state.db import Db
from hermes.state.registry import Registry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.seed
from tests.seed import writing  # noqa: E402

UTC = ZoneInfo("UTC")
JOBS = 10_000
DUE = 1_000
LATE_JOBS = 200
ROUNDS = 3
T0 = 1_800_000_000.0


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


def fill(path: Path) -> None:
    hourly = Schedule("cron", "every 1h", expr="0 * * * *")
    with writing(path) as conn:
        for i in range(JOBS):
            create_job(conn, NewJob(f"job-{i}", hourly, prompt="p"), T0, UTC)
        # the first DUE jobs are due now; the rest later
        conn.execute(
            "UPDATE cron_jobs SET next_run_at = ? WHERE rowid IN"
            " (SELECT rowid FROM cron_jobs ORDER BY rowid LIMIT ?)",
            (T0 + 10, DUE),
        )


def copy(src: Path, dest: Path) -> None:
    source, out = apsw.Connection(str(src)), apsw.Connection(str(dest))
    with out.backup("main", source, "main") as job:
        job.step()
    source.close()
    out.close()


def due_ids(conn: apsw.Connection, now: float) -> list[str]:
    sql = "SELECT id FROM cron_jobs WHERE state = 'scheduled' AND next_run_at <= ?"
    return [r[0] for r in conn.execute(sql, (now,))]


async def measure_claims(root: Path) -> tuple[float, float]:
    registry = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, root / "batch.db") as batch_db:
            start = time.perf_counter()
            report = await batch_db.write(claim_due, "bench", T0 + 20, 60.0, UTC)
            batch = time.perf_counter() - start
            assert len(report.claims) == DUE, len(report.claims)

        async with Db(registry, root / "per-job.db") as per_job_db:
            ids = await per_job_db.read(due_ids, T0 + 20)
            assert len(ids) == DUE
            start = time.perf_counter()
            for job_id in ids:  # one writer transaction per job
                await per_job_db.write(claim_one, job_id, "bench", T0 + 20)
            per_job = time.perf_counter() - start
        registry.request_drain(trio.current_time() + 30)
    return batch, per_job


class LatenessRunner:
    def __init__(self) -> None:
        self.lateness: list[float] = []
        self.all_fired = trio.Event()

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        self.lateness.append(time.time() - job.next_run_at)
        if len(self.lateness) == LATE_JOBS:
            self.all_fired.set()
        return "[SILENT]"


async def measure_lateness(root: Path) -> list[float]:
    path = root / "lateness.db"
    registry = Registry()
    runner = LatenessRunner()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, path) as gen:
            due = float(int(time.time()) + 2)  # all in the same second
            once = Schedule("once", "soon", at=due)
            for i in range(LATE_JOBS):
                await gen.write(create_job, NewJob(f"late-{i}", once, prompt="p"), time.time(), UTC)
            ctx = FireContext(scripts=root, output_dir=root / "out", spill_dir=root / "spill",
                              runner=runner, config=CronConfig())  # fmt: skip
            scheduler = Scheduler(registry, path, ctx, UTC)
            async with trio.open_nursery() as fires:  # it stops before the registry does
                address = await fires.start(scheduler.run)
                await address.cast(JobsChanged())
                with trio.fail_after(30):
                    await runner.all_fired.wait()
                scheduler.request_drain(trio.current_time() + 5)
        registry.request_drain(trio.current_time() + 30)
    return runner.lateness


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fill(root / "seed.db")
        batches, per_jobs = [], []
        for r in range(ROUNDS):  # fresh copies each round; medians reported
            rnd = root / f"round{r}"
            rnd.mkdir()
            copy(root / "seed.db", rnd / "batch.db")
            copy(root / "seed.db", rnd / "per-job.db")
            batch, per_job = trio.run(measure_claims, rnd)
            batches.append(batch)
            per_jobs.append(per_job)
        batch, per_job = statistics.median(batches), statistics.median(per_jobs)
        lateness = sorted(trio.run(measure_lateness, root))
    p50 = lateness[len(lateness) // 2] * 1000
    p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))] * 1000
    print(f"claim {DUE} of {JOBS} due jobs   one transaction per job {per_job * 1000:8.1f} ms")
    print(f"claim {DUE} of {JOBS} due jobs   hermes, one batch         {batch * 1000:8.1f} ms"
          f"   (medians of {ROUNDS} rounds)")  # fmt: skip
    print(f"lateness of {LATE_JOBS} jobs due in one second: p50 {p50:.1f} ms  p99 {p99:.1f} ms")
    print(f"RESULT batch_ratio={per_job / batch:.1f} lateness_p99_ms={p99:.1f}")


if __name__ == "__main__":
    main()
