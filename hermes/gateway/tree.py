"""The root of the serve tree and the order of its children."""

from __future__ import annotations

from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.config import Config
from hermes.cron.fire import FireContext
from hermes.cron.runner import EchoRunner
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

    def scheduler() -> Scheduler:
        ctx = FireContext(scripts=home.scripts, spill_dir=home.logs / "cron", runner=EchoRunner())
        registry = root.handle_of("state")
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
