"""The Scheduler actor on a mock clock, with real SQLite and real script processes.

The clock is `io_clock` (see tests/conftest.py): it autojumps only after
20 ms of real idleness, because SQLite work runs in a worker thread.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from hermes.cron.jobs import Job
from hermes.cron.scheduler import CancelFire, RunNow
from hermes.cron.store import cancel_job
from hermes.state.db import Db
from hermes.terminal.tree import _stat
from tests.cron.harness import (
    T0,
    Runner,
    add_job,
    history,
    make_scheduler,
    settle,
    wait_runs,
    write,
)


@pytest.fixture
def cron_clock(io_clock):
    return io_clock


async def queued(registry, home) -> list[tuple[str, str]]:
    """The briefs the fires put into the outbox: (target, text) in order."""
    async with Db(registry, home.state_db) as db:
        rows = await db.read(
            lambda c: list(
                c.execute(
                    "SELECT platform, chat_id, text FROM outbox WHERE kind = 'cron' ORDER BY id"
                )
            )
        )
    return [(f"{platform}:{chat}", text) for platform, chat, text in rows]


@pytest.fixture
def setup(home, registry, cron_clock):
    def make(runner=None, **config):
        runner = runner or Runner()
        return make_scheduler(home, registry, runner, **config), runner

    return make


async def fire_once(sched, runner, registry, home, schedule, **job) -> Job:
    """Run the scheduler until the job's first fire has recorded and delivered."""
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        made = await add_job(registry, home, schedule, address, **job)
        await wait_runs(runner, 1)
        await settle(sched)
        sched.request_drain(trio.current_time() + 5)
    return made


async def test_fires_on_time_and_wakes_early_for_new_jobs(setup, registry, home, cron_clock):
    sched, runner = setup()  # no polling: it sleeps until the earliest due
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, "in 1h", address)
        soon = await add_job(registry, home, "in 2s", address, name="soon")
        await wait_runs(runner, 2)
        sched.request_drain(trio.current_time() + 5)
    fired_at = [t for t, _ in runner.prompts]
    assert fired_at[0] == pytest.approx(2, abs=0.5)  # not at the next 5 s poll
    assert fired_at[1] == pytest.approx(3600, abs=0.5)
    runs, final = await history(registry, home, job.id)
    assert [r.status for r in runs] == ["ok"] and final.state == "completed"
    assert (await history(registry, home, soon.id))[1].state == "completed"


async def test_losing_the_lease_cancels_the_fire_and_kills_the_script_tree(
    setup, registry, home, cron_clock
):
    fifo = home.scripts / "started"
    os.mkfifo(fifo)
    (home.scripts / "tree.sh").write_text(
        f"sleep 300 & echo $! > {home.scripts}/child.pid\necho up > {fifo}\nsleep 300\n"
    )
    sched, _ = setup()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, "in 1m", address, prompt=None, script="tree.sh",
                            no_agent=True)  # fmt: skip
        await trio.to_thread.run_sync(fifo.read_text)  # the tree is up
        child = int((home.scripts / "child.pid").read_text())
        ((key, run),) = sched.running.items()
        cancelled_at = trio.current_time()
        await write(registry, home, cancel_job, job.id, T0 + cancelled_at)  # as the CLI does
        await run.done.wait()  # the lease watch saw the lease gone
        assert trio.current_time() - cancelled_at < 1 + 2 + 0.5  # a watch, the grace, reaping
        sched.request_drain(trio.current_time() + 5)
    stat = _stat(child)
    assert stat is None or stat[0] in "ZX"
    runs, final = await history(registry, home, job.id)
    assert [(r.status, r.error) for r in runs] == [("cancelled", None)]
    assert (final.state, final.next_run_at) == ("cancelled", None)  # a one-shot ends so


async def test_drain_interrupts_the_fire_in_flight_on_its_own_token(
    setup, registry, home, cron_clock
):
    sched, runner = setup(runner=Runner(delay=1000))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, "every 1m", address)
        await wait_runs(runner, 1)
        begin = trio.current_time()
        sched.stop_intake()
        sched.request_drain(begin + 10)
    assert trio.current_time() - begin == pytest.approx(10, abs=1)
    runs, final = await history(registry, home, job.id)
    assert [r.status for r in runs] == ["interrupted"]
    assert "shut down" in runs[0].error
    assert final.running_fence is None and final.state == "scheduled"


async def test_failure_streak_nudges_at_the_threshold(setup, registry, home, cron_clock):
    sched, runner = setup(runner=Runner(fail=RuntimeError("provider down")),
                          failure_nudge_threshold=3)  # fmt: skip
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        await add_job(registry, home, "every 1m", address, deliver="telegram:42")
        once = await add_job(registry, home, "in 30s", address, name="once", deliver="telegram:43")
        await write(registry, home, _streak, once.id, 5)  # it has failed before, often
        await wait_runs(runner, 5)
        await settle(sched)
        sched.request_drain(trio.current_time() + 5)
    sent = await queued(registry, home)
    recurring = [text for target, text in sent if target == "telegram:42"]
    once_job, once = once, [text for target, text in sent if target == "telegram:43"]
    assert all("failed: provider down" in t for t in recurring + once)
    assert len(recurring) >= 3
    nudged = ["times in a row" in t for t in recurring]
    assert nudged == [False, False] + [True] * (len(recurring) - 2)
    assert "failed 3 times in a row" in recurring[2]
    assert len(once) == 1 and "in a row" not in once[0]  # one-shots never nudge, at any streak
    _, final = await history(registry, home, once_job.id)
    assert final.failure_streak == 6  # over the threshold: only being a one-shot kept it quiet


def _streak(conn, job_id, streak):
    conn.execute("UPDATE cron_jobs SET failure_streak = ? WHERE id = ?", (streak, job_id))


async def test_a_stale_fires_result_is_refused_and_not_delivered(setup, registry, home, cron_clock):
    """A newer fire took the job while this one ran: its result must change nothing."""

    class TakenOver(Runner):
        async def run(self, job, prompt, session_id):
            reply = await super().run(job, prompt, session_id)
            await write(registry, home, _take_over, job.id)  # after it ran, before it records
            return reply

    sched, runner = setup(runner=TakenOver(["the brief"]))
    job = await fire_once(sched, runner, registry, home, "in 1m", deliver="telegram:42")
    assert await queued(registry, home) == []
    runs, final = await history(registry, home, job.id)
    assert [(r.status, r.error) for r in runs] == [("stale", "refused: a newer fire owns the job")]
    assert final.lease_owner == "someone-else" and final.last_status is None


def _take_over(conn, job_id):
    conn.execute(
        "UPDATE cron_jobs SET fence = fence + 1, running_fence = fence + 1,"
        " lease_owner = 'someone-else' WHERE id = ?",
        (job_id,),
    )


async def test_nudge_threshold_zero_disables_it(setup, registry, home, cron_clock):
    sched, runner = setup(runner=Runner(fail=RuntimeError("x")), failure_nudge_threshold=0)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        await add_job(registry, home, "every 1m", address, deliver="telegram:42")
        await wait_runs(runner, 4)
        await settle(sched)
        sched.request_drain(trio.current_time() + 5)
    sent = await queued(registry, home)
    assert len(sent) >= 3 and not any("in a row" in t for _, t in sent)


@pytest.mark.parametrize(
    ("reply", "delivered"),
    [("[SILENT]", False), ("nothing new\n[SILENT]", False), ("NO_REPLY", False),
     ("SILENT\nall quiet", False), ("", False), ("the SILENT majority", True)],
)  # fmt: skip
async def test_silent_replies_are_not_delivered(
    setup, registry, home, reply, delivered, cron_clock
):
    sched, runner = setup(runner=Runner([reply]))
    job = await fire_once(sched, runner, registry, home, "in 1m", deliver="telegram:42")
    assert bool(await queued(registry, home)) is delivered
    runs, _ = await history(registry, home, job.id)
    assert runs[0].status == "ok" and runs[0].output_path  # a silent run is still recorded


async def test_run_prompt_text_is_for_that_fire_only(setup, registry, home, cron_clock):
    sched, runner = setup()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, "every 1h", address)
        await address.call(RunNow(job.id, "look at the staging server too"))
        await wait_runs(runner, 2)  # the manual fire, then the scheduled one
        sched.request_drain(trio.current_time() + 5)
    manual, scheduled = (p for _, p in runner.prompts)
    assert manual.endswith("## Run Context\n\nlook at the staging server too")
    assert "Run Context" not in scheduled
    _, final = await history(registry, home, job.id)
    runs, _ = await history(registry, home, job.id)
    assert final.prompt == "brief me"
    assert [r.run_context for r in runs][-1] == "look at the staging server too"


async def test_output_files_and_delivery_failures_are_recorded(setup, registry, home, cron_clock):
    sched, runner = setup(runner=Runner(["the brief"]))
    job = await fire_once(
        sched, runner, registry, home, "in 1m", deliver="slack:C1,telegram:42,local"
    )
    assert await queued(registry, home) == [("telegram:42", "the brief")]  # slack stopped nothing
    runs, final = await history(registry, home, job.id)
    assert runs[0].delivery_error == "slack:C1: no slack adapter is configured"
    assert final.last_status == "delivery_failed" and final.failure_streak == 0
    text = Path(runs[0].output_path).read_text()
    assert "## Response\n\nthe brief" in text and f"job: `{job.id}`" in text


async def test_cancel_by_execution_token(setup, registry, home, cron_clock):
    sched, runner = setup(runner=Runner(delay=1000))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, "every 1m", address)
        await wait_runs(runner, 1)
        ((job_id, fence),) = sched.running
        assert await address.call(CancelFire(job.id, fence + 1)) == []  # another execution
        assert await address.call(CancelFire(job.id, fence)) == [f"{job.id}#{fence}"]
        await settle(sched)
        sched.request_drain(trio.current_time() + 5)
    runs, _ = await history(registry, home, job.id)
    assert [(r.fence, r.status, r.error) for r in runs][-1] == (fence, "cancelled", None)


async def deliveries_table(registry, home):
    async with Db(registry, home.state_db) as db:
        return await db.read(
            lambda c: list(c.execute(
                "SELECT platform, chat_id, provenance, status, error, outbox_key"
                " FROM cron_deliveries ORDER BY id"))
        )  # fmt: skip


async def test_each_target_is_recorded_on_the_run(setup, registry, home, cron_clock):
    sched, runner = setup(runner=Runner(["brief"]))
    job = await fire_once(sched, runner, registry, home, "in 1m",
                          deliver="telegram:42,slack:C1,local")  # fmt: skip
    rows = await deliveries_table(registry, home)
    assert rows == [
        ("telegram", "42", "explicit", "queued", None, f"cron:{job.id}:1:telegram:42"),
        ("slack", "C1", "explicit", "failed", "slack:C1: no slack adapter is configured", None),
    ]
