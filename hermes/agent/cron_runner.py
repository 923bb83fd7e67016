"""Cron agent fires as real agent turns, each in its own session (`cron_<job>_<time>`),
with the role, memory and chat of the job's maker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore, memory_of
from hermes.agent.permissions import Caller
from hermes.agent.settings import Settings
from hermes.agent.tools.base import ToolContext
from hermes.cron.fire import FireContext
from hermes.cron.jobs import Job
from hermes.delivery.session_keys import Keying
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.registry import Registry
from hermes.terminal.env import EnvPolicy
from hermes.terminal.placement import Backends
from hermes.terminal.session import TerminalSession, own_directory


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
        *,
        workspace: Path,
        backends: Backends | None = None,
    ) -> None:
        """`workdir`: where every fire's commands start (agent.workdir), else each its own
        directory under `workspace`; `policy`: what commands' environments hold;
        `backends`: where they run (hermes.terminal.placement)."""
        self.backends = backends
        self.platforms = platforms  # where its send_message may send
        self.outbox = outbox
        self.agent = agent
        self.registry = registry
        self.state_db = state_db
        self.memory = MemoryStore(memories)
        self.workdir = workdir
        self.workspace = workspace
        self.state_dir = state_dir
        self.tz = tz
        self.policy = policy or EnvPolicy()

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        chosen = Path(job.workdir) if job.workdir else self.workdir
        own = await own_directory(self.workspace, session_id)
        terminal = TerminalSession(
            chosen or own,
            own=own,
            state_dir=self.state_dir,
            policy=self.policy,
            backends=self.backends,
        )
        origin = job.origin
        role = "owner" if job.role == "owner" else "user"
        maker = (origin.platform, origin.user_id or "") if origin else ("cli", "")
        caller = Caller(*maker, role)
        async with Db(self.registry, self.state_db) as db:
            ctx = ToolContext(
                session_id,
                db,
                terminal,
                memory_of(self.memory, caller),
                caller,
                origin=origin,
                tz=self.tz,
                outbox=self.outbox(),
                platforms=self.platforms,
            )
            result = await self.agent.run_turn(
                ctx, prompt, stream=False, source="cron", skills=job.skills
            )
        return result.text


def cron_fire_context(
    agent: Agent,
    registry: Registry,
    home: HermesHome,
    tz: ZoneInfo,
    config: Settings,
    policy: EnvPolicy | None = None,
    outbox: Callable[[], Address | None] = lambda: None,
    clock: Clock | None = None,
    backends: Backends | None = None,
) -> FireContext:
    """How cron fires run in this home: scripts from its scripts/, agent turns with
    memory, outputs under cron/output, briefs into the outbox (`outbox` is the Outbox
    actor to nudge, when one runs in this process), every time read from `clock`
    (serve's one clock; a real one by default)."""
    platforms = config.enabled_platforms()
    policy = policy or EnvPolicy()
    runner = CronAgentRunner(
        agent,
        registry,
        home.state_db,
        home.memories,
        config.agent.workdir_path(),
        home.root / ".terminal",
        tz,
        frozenset({"local", *platforms}),
        outbox,
        policy,
        workspace=home.workspace,
        backends=backends,
    )
    return FireContext(
        scripts=home.scripts,
        output_dir=home.cron_output,
        spill_dir=home.logs / "cron",
        runner=runner,
        config=config.cron,
        clock=clock or Clock(),
        platforms=platforms,
        keying=Keying.of(config.platforms, config.gateway),
        outbox=outbox,
        policy=policy,
    )
