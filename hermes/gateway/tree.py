"""The root of the serve tree: its children in start order and what each is given.

rest_for_one: a child that crashes restarts everything started after it,
which is everything that was given its address. So each factory passes the
current handles of earlier children, explicitly and typed, when it builds
its child; only the endpoint's methods look later children up at call time.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from hermes.actors.address import Address
from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.adapters.local_ws import EndpointHandle, LocalEndpoint
from hermes.agent.cron_runner import cron_fire_context
from hermes.agent.providers import build_agent
from hermes.config import Config, Secrets
from hermes.cron.scheduler import Scheduler
from hermes.gateway.gateway import Gateway, SessionServices
from hermes.gateway.local_delivery import LocalDeliverer
from hermes.gateway.rpc import Methods
from hermes.home import HermesHome, write_secret_file
from hermes.state.registry import Registry
from hermes.terminal.background import BackgroundProcesses


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


def build_root(home: HermesHome, config: Config, on_bound: Callable[[int], None]) -> Supervisor:
    """The serve tree, children in start order (they stop in reverse).

    The state registry holds HERMES_HOME/state.db open from the start and,
    being first, stops last; the gateway, last, stops first: its turns finish
    while all else still runs. `on_bound(port)` is told the endpoint's port
    each time it binds.
    """
    agent = build_agent(config, Secrets.load(home.env_path))
    token = serve_token(home)
    tz = config.zone()

    def registry() -> Registry:
        return root.handle_of("state", Registry)

    def deliverer() -> LocalDeliverer:
        endpoint = root.handle_of("local", EndpointHandle).address
        return LocalDeliverer(endpoint, registry(), home.state_db)

    def endpoint() -> LocalEndpoint:
        local = config.gateway.local
        methods = Methods(root, registry(), home.state_db, tz)

        def bound(port: int) -> None:
            write_secret_file(home.root / "serve.port", f"{port}\n")  # where clients look
            on_bound(port)

        return LocalEndpoint(local.host, local.port, token, methods, bound)

    def scheduler() -> Scheduler:
        ctx = cron_fire_context(agent, registry(), home, tz, config.cron, deliverer())
        return Scheduler(registry(), home.state_db, ctx, tz)

    def gateway() -> Gateway:
        services = SessionServices(
            background=root.handle_of("terminal", Address),
            scheduler=root.handle_of("scheduler", Address),
            deliverer=deliverer(),
            tz=tz,
        )
        return Gateway(registry(), home.state_db, home.root, home.memories, agent,
                       config.gateway, services)  # fmt: skip

    drain = config.gateway.drain_timeout
    root = Supervisor(
        "serve",
        [
            ChildSpec("state", lambda: Registry(keep_open=[home.state_db]), shutdown=30.0),
            ChildSpec("terminal", BackgroundProcesses, shutdown=10.0),
            ChildSpec("local", endpoint, shutdown=5.0),
            ChildSpec("scheduler", scheduler, shutdown=drain),
            ChildSpec("gateway", gateway, shutdown=drain),
        ],
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=5,
        period=60.0,
    )
    return root
