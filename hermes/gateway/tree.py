"""The root of the serve tree and the order of its children."""

from __future__ import annotations

from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.agent.cron_runner import CronAgentRunner
from hermes.agent.loop import Agent
from hermes.agent.providers import build_chain
from hermes.agent.tools.catalog import default_tools
from hermes.config import Config, Secrets
from hermes.cron.fire import FireContext
from hermes.cron.scheduler import Scheduler
from hermes.home import HermesHome
from hermes.state.registry import Registry
from hermes.terminal.background import BackgroundProcesses


def build_root(home: HermesHome, config: Config) -> Supervisor:
    """The serve tree, children in start order (they stop in reverse).

    rest_for_one: a child that crashes restarts everything started after it,
    which is everything that may hold its address. The state registry holds
    HERMES_HOME/state.db open from the start and, being first, stops last.
    """

    agent = Agent(
        build_chain(config, Secrets.load(home.env_path)), default_tools(), config.agent.max_turns
    )

    def scheduler() -> Scheduler:
        registry = root.handle_of("state")
        runner = CronAgentRunner(
            agent, registry, home.state_db, home.memories, home.root, home.root / ".terminal",
            config.zone(),
        )  # fmt: skip
        ctx = FireContext(scripts=home.scripts, spill_dir=home.logs / "cron", runner=runner)
        return Scheduler(registry, home.state_db, ctx, home.cron_output, config.cron, config.zone())

    root = Supervisor(
        "serve",
        [
            ChildSpec("state", lambda: Registry(keep_open=[home.state_db]), shutdown=30.0),
            ChildSpec("terminal", BackgroundProcesses, shutdown=10.0),
            ChildSpec("scheduler", scheduler, shutdown=config.gateway.drain_timeout),
        ],
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=5,
        period=60.0,
    )
    return root
