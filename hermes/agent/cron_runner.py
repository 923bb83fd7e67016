"""Cron agent fires as real agent turns, each in its own session (`cron_<job>_<time>`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

from hermes.actors.address import Address
from hermes.actors.clock import WallClock
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore
from hermes.agent.tools.base import ToolContext
from hermes.config import Config
from hermes.cron.fire import FireContext
from hermes.cron.jobs import Job
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.registry import Registry
from hermes.terminal.session import TerminalSession


class CronAgentRunner:
    """The AgentRunner every fire calls. A provider failure raises, so the
    fire fails and counts in the job's streak."""

    def __init__(
        self,
        agent: Agent,
        registry: Registry,
        state_db: Path,
        memories: Path,
        workdir: Path,
        state_dir: Path,
        tz: ZoneInfo,
        platforms: frozenset[str] = frozenset({"local"}),
        outbox: Callable[[], Address | None] = lambda: None,
    ) -> None:
        self.platforms = platforms  # where its send_message may send
        self.outbox = outbox
        self.agent = agent
        self.registry = registry
        self.state_db = state_db
        self.memory = MemoryStore(memories)
        self.workdir = workdir
        self.state_dir = state_dir
        self.tz = tz

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        terminal = TerminalSession(
            Path(job.workdir) if job.workdir else self.workdir, state_dir=self.state_dir
        )
        async with Db(self.registry, self.state_db) as db:
            ctx = ToolContext(session_id, db, terminal, self.memory, origin=job.origin, tz=self.tz,
                              outbox=self.outbox(), platforms=self.platforms)  # fmt: skip
            result = await self.agent.run_turn(ctx, prompt, stream=False, source="cron")
        return result.text


def cron_fire_context(
    agent: Agent,
    registry: Registry,
    home: HermesHome,
    tz: ZoneInfo,
    config: Config,
    outbox: Callable[[], Address | None] = lambda: None,
) -> FireContext:
    """How cron fires run in this home: scripts from its scripts/, agent turns with
    memory, outputs under cron/output, briefs into the outbox (`outbox` is the Outbox
    actor to nudge, when one runs in this process)."""
    platforms = config.enabled_platforms()
    runner = CronAgentRunner(
        agent, registry, home.state_db, home.memories, home.root, home.root / ".terminal", tz,
        frozenset({"local", *platforms}), outbox,
    )  # fmt: skip
    return FireContext(
        scripts=home.scripts,
        output_dir=home.cron_output,
        spill_dir=home.logs / "cron",
        runner=runner,
        config=config.cron,
        clock=WallClock(),
        platforms=platforms,
        sessions=config.gateway,
        outbox=outbox,
    )
