"""The root of the serve tree and the order of its children."""

from __future__ import annotations

import secrets

import attrs

from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.adapters.local_ws import LocalEndpoint
from hermes.agent.cron_runner import cron_fire_context
from hermes.agent.loop import Agent
from hermes.agent.providers import build_chain
from hermes.agent.tools.catalog import default_tools
from hermes.config import Config, Secrets
from hermes.cron.scheduler import Scheduler
from hermes.gateway.gateway import Gateway
from hermes.gateway.local_delivery import LocalDeliverer
from hermes.gateway.rpc import Methods
from hermes.home import HermesHome, write_secret_file
from hermes.state.registry import Registry
from hermes.terminal.background import BackgroundProcesses

# Where serve's write functions live beyond hermes.state: each writer's process
# imports them as it starts instead of at the first cron write (see DbWriter).
WRITE_MODULES = ("hermes.cron.store", "hermes.cron.outbox")


def serve_token(home: HermesHome) -> str:
    """The local endpoint's token, created (0600) on first start."""
    try:
        token = home.serve_token.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        write_secret_file(home.serve_token, token + "\n")
    return token


@attrs.define
class Live:
    """The current instances of children that others read from (they change on restart)."""

    endpoint: LocalEndpoint | None = None
    gateway: Gateway | None = None


def build_root(home: HermesHome, config: Config) -> tuple[Supervisor, Live]:
    """The serve tree, children in start order (they stop in reverse).

    rest_for_one: a child that crashes restarts everything started after it,
    which is everything that may hold its address. The state registry holds
    HERMES_HOME/state.db open from the start and, being first, stops last;
    the gateway, last, stops first: its turns finish while all else still runs.
    """
    agent = Agent(
        build_chain(config, Secrets.load(home.env_path)), default_tools(), config.agent.max_turns
    )
    token = serve_token(home)
    live = Live()

    def deliverer() -> LocalDeliverer:
        return LocalDeliverer(
            lambda: root.handle_of("local"), lambda: live.gateway.db if live.gateway else None
        )

    def scheduler() -> Scheduler:
        registry = root.handle_of("state")
        ctx = cron_fire_context(agent, registry, home, config.zone())
        return Scheduler(registry, home.state_db, ctx, home.cron_output, config.cron,
                         config.zone(), deliverer=deliverer())  # fmt: skip

    def on_bound(port: int) -> None:
        """Clients (hermes chat) find the port here, also after the endpoint restarts."""
        write_secret_file(home.root / "serve.port", f"{port}\n")

    def endpoint() -> LocalEndpoint:
        local = config.gateway.local
        methods = Methods(root, home.state_db, config.zone())
        live.endpoint = LocalEndpoint(local.host, local.port, token, methods, on_bound)
        return live.endpoint

    def extras() -> dict:
        """Read at each session's start: the children they name may have restarted."""
        return {
            "background": root.handle_of("terminal"),
            "scheduler": root.handle_of("scheduler"),
            "deliverer": deliverer(),
            "tz": config.zone(),
        }

    def gateway() -> Gateway:
        live.gateway = Gateway(root.handle_of("state"), home.state_db, home.root, home.memories,
                               agent, config.gateway, extras)  # fmt: skip
        return live.gateway

    drain = config.gateway.drain_timeout
    root = Supervisor(
        "serve",
        [
            ChildSpec(
                "state",
                lambda: Registry(keep_open=[home.state_db], preload=WRITE_MODULES),
                shutdown=30.0,
            ),  # fmt: skip
            ChildSpec("terminal", BackgroundProcesses, shutdown=10.0),
            ChildSpec("scheduler", scheduler, shutdown=drain),
            ChildSpec("local", endpoint, shutdown=5.0),
            ChildSpec("gateway", gateway, shutdown=drain),
        ],
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=5,
        period=60.0,
    )
    return root, live
