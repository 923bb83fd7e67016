"""What the Scheduler tests share: a scripted agent runner, a Scheduler on a mock
wall clock over a real state.db, and helpers that add jobs and read what happened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from zoneinfo import ZoneInfo

import trio

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.adapters.settings import PlatformConfig
from hermes.cron.fire import FireContext
from hermes.cron.jobs import Job, Run
from hermes.cron.schedule import parse_schedule
from hermes.cron.scheduler import JobsChanged, Scheduler
from hermes.cron.settings import CronConfig
from hermes.cron.store import NewJob, create_job, get_job, run_history
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.registry import Registry

UTC = ZoneInfo("UTC")
T0 = 1_800_000_000.0  # the wall clock at trio time 0 (2027-01-15 08:00 UTC)
PLATFORMS = {"telegram": PlatformConfig()}  # slack has no adapter configured


class Runner:
    """An AgentRunner that records prompts and answers from a script of replies."""

    def __init__(self, replies=None, delay: float = 0.0, fail: Exception | None = None):
        self.replies = list(replies or [])
        self.delay = delay
        self.fail = fail
        self.prompts: list[tuple[float, str]] = []
        self.calls = trio.Event()

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        self.prompts.append((trio.current_time(), prompt))
        self.calls.set()
        self.calls = trio.Event()
        await trio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.replies.pop(0) if self.replies else f"done: {prompt}"


def make_scheduler(
    home: HermesHome,
    registry: Registry,
    runner: Runner,
    tz: ZoneInfo = UTC,
    watch_other_writers: float | None = None,
    **config,
) -> Scheduler:
    ctx = FireContext(
        scripts=home.scripts,
        output_dir=home.cron_output,
        spill_dir=home.logs / "cron",
        runner=runner,
        config=CronConfig(**{"lease_seconds": 30.0, "heartbeat_seconds": 10.0, **config}),
        clock=Clock(origin=T0),
        platforms=PLATFORMS,
    )
    return Scheduler(registry, home.state_db, ctx, tz, watch_other_writers=watch_other_writers)


@asynccontextmanager
async def scheduling(sched: Scheduler) -> AsyncIterator[Address]:
    """The scheduler running for the block (its address), drained as the block ends."""
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        yield address
        sched.request_drain(trio.current_time() + 5)


async def add_job(registry, home, text, tell: Address | None = None, tz=UTC, **kw) -> Job:
    """Add a job as the CLI does: commit it, then tell the running scheduler (`tell`)."""
    async with Db(registry, home.state_db) as db:
        schedule = parse_schedule(text, tz, T0 + trio.current_time())
        new = NewJob(kw.pop("name", text), schedule, **{"prompt": "brief me", **kw})
        job = await db.write(create_job, new, T0 + trio.current_time(), tz)
    if tell is not None:
        await tell.cast(JobsChanged())
    return job


async def write(registry, home, fn, *args):
    async with Db(registry, home.state_db) as db:
        return await db.write(fn, *args)


async def history(registry, home, job_id) -> tuple[list[Run], Job | None]:
    """The job's runs, newest first, and the job."""
    async with Db(registry, home.state_db) as db:
        return await db.read(run_history, job_id, 100), await db.read(get_job, job_id)


async def wait_runs(runner: Runner, count: int) -> None:
    while len(runner.prompts) < count:
        await runner.calls.wait()


async def settle(sched: Scheduler) -> None:
    """Until every fire in flight has recorded its result and delivered its brief."""
    for fire in list(sched.running.values()):
        await fire.done.wait()


async def cut_by_shutdown(registry: Registry, home: HermesHome, schedule: str) -> Job:
    """A job added to a running scheduler, whose first fire the scheduler's drain cuts."""
    runner = Runner(delay=1000)
    sched = make_scheduler(home, registry, runner)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(sched.run)
        job = await add_job(registry, home, schedule, address)
        await wait_runs(runner, 1)
        sched.request_drain(trio.current_time() + 5)
    return job
