"""Cron agent fires as real agent turns, each in its own session (`cron_<job>_<time>`),
with the role, memory and chat of the job's maker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import trio

from hermes.actors.address import Address
from hermes.actors.clock import WallClock
from hermes.agent.loop import Agent
from hermes.agent.memory import Memory, MemoryStore, user_directory
from hermes.agent.permissions import Caller
from hermes.agent.tools.base import ToolContext
from hermes.config import Config
from hermes.cron.fire import FireContext
from hermes.cron.jobs import Job
from hermes.home import HermesHome, make_private_dir, path_part
from hermes.state.db import Db
from hermes.state.registry import Registry
from hermes.terminal.env import EnvPolicy
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
        workdir: Path | None,
        state_dir: Path,
        tz: ZoneInfo,
        platforms: frozenset[str] = frozenset({"local"}),
        outbox: Callable[[], Address | None] = lambda: None,
        policy: EnvPolicy | None = None,
        workspace: Path | None = None,
    ) -> None:
        """`workdir`: where every fire's commands start (agent.workdir), else each its own
        directory under `workspace`; `policy`: what commands' environments leave out."""
        self.platforms = platforms  # where its send_message may send
        self.outbox = outbox
        self.agent = agent
        self.registry = registry
        self.state_db = state_db
        self.memories = memories
        self.memory = MemoryStore(memories)
        self.workdir = workdir
        self.workspace = workspace or state_dir.parent / "workspace"
        self.state_dir = state_dir
        self.tz = tz
        self.policy = policy or EnvPolicy()

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        workdir = Path(job.workdir) if job.workdir else self.workdir
        if workdir is None:
            workdir = self.workspace / path_part(session_id)
            await trio.to_thread.run_sync(make_private_dir, workdir)
        terminal = TerminalSession(workdir, state_dir=self.state_dir, policy=self.policy)
        origin = job.origin
        role = "owner" if job.role == "owner" else "user"
        caller = (
            Caller(origin.platform, origin.user_id or "", role)
            if origin
            else Caller("cli", "", role)
        )
        own = None
        if role != "owner" and origin is not None:
            own = MemoryStore(user_directory(self.memories, origin.platform, origin.user_id or ""))
        async with Db(self.registry, self.state_db) as db:
            ctx = ToolContext(session_id, db, terminal, Memory(self.memory, own), caller,
                              origin=origin, tz=self.tz, outbox=self.outbox(),
                              platforms=self.platforms)  # fmt: skip
            result = await self.agent.run_turn(ctx, prompt, stream=False, source="cron")
        return result.text


def cron_fire_context(
    agent: Agent,
    registry: Registry,
    home: HermesHome,
    tz: ZoneInfo,
    config: Config,
    policy: EnvPolicy | None = None,
    outbox: Callable[[], Address | None] = lambda: None,
) -> FireContext:
    """How cron fires run in this home: scripts from its scripts/, agent turns with
    memory, outputs under cron/output, briefs into the outbox (`outbox` is the Outbox
    actor to nudge, when one runs in this process)."""
    platforms = config.enabled_platforms()
    policy = policy or EnvPolicy()
    workdir = Path(config.agent.workdir).expanduser() if config.agent.workdir else None
    runner = CronAgentRunner(
        agent, registry, home.state_db, home.memories, workdir, home.root / ".terminal", tz,
        frozenset({"local", *platforms}), outbox, policy, home.workspace,
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
        policy=policy,
    )
