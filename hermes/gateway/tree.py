"""The root of the serve tree and the order of its children."""

from __future__ import annotations

from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.config import Config
from hermes.home import HermesHome
from hermes.state.registry import Registry
from hermes.terminal.background import BackgroundProcesses


def serve_children(home: HermesHome, config: Config) -> list[ChildSpec]:
    """The serve tree's children, in start order (they stop in reverse).

    The order is DESIGN.md's: database writer, scheduler, terminal, adapters,
    gateway; each part is added here as it is built. The state registry
    holds HERMES_HOME/state.db open from the start and, being first, stops last.
    """
    return [
        ChildSpec("state", lambda: Registry(keep_open=[home.state_db]), shutdown=30.0),
        ChildSpec("terminal", BackgroundProcesses, shutdown=10.0),
    ]


def build_root(home: HermesHome, config: Config) -> Supervisor:
    """rest_for_one: a child that crashes restarts everything started after it,
    which is everything that may hold its address."""
    return Supervisor(
        "serve",
        serve_children(home, config),
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=5,
        period=60.0,
    )
