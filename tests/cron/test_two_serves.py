"""Two real `hermes serve` processes on one HERMES_HOME fire each occurrence once."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter, defaultdict
from zoneinfo import ZoneInfo

import apsw
import pytest

from hermes.cron.schedule import Schedule
from hermes.cron.store import NewJob, create_job
from tests.processes import wait_ready
from tests.seed import writing

JOBS = 40
EVERY = 0.75  # 400 fires in 7.5 s: 53 contended claims a second
FIRES = 10 * JOBS


@pytest.mark.timeout(240)
@pytest.mark.long
def test_two_serves_fire_every_occurrence_exactly_once(home, spawn):
    """With the default config: the second serve takes free ports where the first holds
    the configured ones."""
    home.config_path.write_text("")  # the defaults, ports included (not the fixture's 0)
    fifo = home.root / "fires"
    os.mkfifo(fifo)
    (home.scripts / "fire.sh").write_text(f"echo tick > {fifo}\necho fired\n")
    now = time.time()
    with writing(home.state_db) as conn:
        for i in range(JOBS):
            every = Schedule("interval", f"every {EVERY:g}s", seconds=EVERY)
            job = NewJob(f"tick-{i}", every, script="fire.sh", no_agent=True)
            create_job(conn, job, now, ZoneInfo("UTC"))

    # Read-write, so opening does not wait for a writer; held open for both serves' fires.
    reader = os.open(fifo, os.O_RDWR)
    serves = [spawn("--no-lock")]
    try:
        wait_ready(serves[0])  # it holds the default ports; the second takes free ones
        serves.append(spawn("--no-lock"))
        wait_ready(serves[1])
        seen = 0
        while seen < FIRES:  # each fire writes one line: wait for them, not for a clock
            seen += os.read(reader, 4096).count(b"\n")
        for serve in serves:
            serve.send_signal(signal.SIGTERM)
        for serve in serves:
            assert serve.wait(timeout=60) == 0, serve.stderr.read()
    finally:
        os.close(reader)  # the spawn fixture kills any serve still running

    conn = apsw.Connection(str(home.state_db))
    rows = list(
        conn.execute(
            "SELECT job_id, due_at, started_at, status, owner FROM cron_runs ORDER BY due_at"
        )
    )
    conn.close()
    # Every occurrence a row: fired, cut by the stop, or skipped (the job's previous fire
    # still ran); one claimed later than a period coalesces the ones it passed (the next
    # is the first after the claim), as a late scheduler must: never two, none lost.
    occurrences = defaultdict(list)
    fires_by_pid = Counter()
    for job_id, due_at, started_at, status, owner in rows:
        assert status in ("ok", "interrupted", "skipped"), (job_id, due_at, status)
        occurrences[job_id].append((due_at, started_at))
        if status == "ok":
            fires_by_pid[int(owner.rsplit(":", 2)[1])] += 1  # owner: "host:pid:random"
    assert len(occurrences) == JOBS
    for job_id, runs in occurrences.items():
        dues = [due for due, _ in runs]
        assert len(dues) == len(set(dues)), f"{job_id} took an occurrence twice"
        for (due, claimed), (following, _) in zip(runs, runs[1:], strict=False):
            expected = due + EVERY
            while expected <= claimed:
                expected += EVERY
            assert round(following - expected, 3) == 0, f"{job_id} lost the one after {due}"
    assert sum(fires_by_pid.values()) >= FIRES
    # Both serves took part: each owns fires, and no one else does.
    assert set(fires_by_pid) == {serve.pid for serve in serves}, fires_by_pid
