"""A cron agent job end to end against the fake provider server."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import trio

from hermes.actors.clock import Clock
from hermes.agent.chain import ProviderChain
from hermes.agent.cron_runner import CronAgentRunner
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.tools.catalog import default_tools
from hermes.cron.fire import FireContext
from hermes.cron.schedule import parse_schedule
from hermes.cron.scheduler import JobsChanged, Scheduler
from hermes.cron.settings import CronConfig
from hermes.cron.store import NewJob, create_job, get_job, run_history
from hermes.state.db import Db
from hermes.state.messages import messages_of
from hermes.state.sessions import list_sessions
from tests.fakes.openai import error_answer, text_answer, tool_answer

UTC = ZoneInfo("UTC")
T0 = 1_800_000_000.0


@pytest.mark.parametrize("fails", [False, True])
async def test_cron_agent_job_end_to_end(fake, home, registry, io_clock, fails):
    if fails:
        fake.script(*[error_answer(503, "overloaded")] * 3)
    else:
        fake.script(
            tool_answer(("memory", {"action": "add", "target": "memory", "text": "checked"})),
            text_answer("All systems nominal."),
        )
    agent = Agent(ProviderChain([OpenAICompatible("A", "model-a", fake.url, "k")]), default_tools())
    ran = trio.Event()

    class Runner(CronAgentRunner):
        async def run(self, job, prompt, session_id):
            try:
                return await super().run(job, prompt, session_id)
            finally:
                ran.set()

    runner = Runner(agent, registry, home.state_db, home.memories, home.root,
                    home.root / ".term", UTC, workspace=home.workspace)  # fmt: skip
    ctx = FireContext(scripts=home.scripts, output_dir=home.cron_output, spill_dir=home.logs,
                      runner=runner, config=CronConfig(), clock=Clock(origin=T0))  # fmt: skip
    scheduler = Scheduler(registry, home.state_db, ctx, UTC)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(scheduler.run)
        async with Db(registry, home.state_db) as db:
            new = NewJob("health", parse_schedule("in 1m", UTC, T0), prompt="Check the systems")
            job = await db.write(create_job, new, T0, UTC)
            await address.cast(JobsChanged())
            await ran.wait()  # the fire is due a minute in (virtual time)
            for run in list(scheduler.running.values()):
                await run.done.wait()  # and its result is recorded
            runs = await db.read(run_history, job.id)
            final = await db.read(get_job, job.id)
            sessions = await db.read(list_sessions, 10, "cron")
            transcript = await db.read(messages_of, sessions[0].id) if sessions else []
        scheduler.request_drain(trio.current_time() + 5)
    output = Path(runs[0].output_path).read_text()
    if fails:
        assert runs[0].status == "error" and "overloaded" in runs[0].error
        assert final.failure_streak == 1
        assert "(FAILED)" in output
    else:
        assert runs[0].status == "ok" and final.failure_streak == 0
        assert "All systems nominal." in output
        assert sessions[0].id.startswith(f"cron_{job.id}_")
        assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
        assert (home.memories / "MEMORY.md").read_text() == "- checked\n"  # cron has memory
