"""The operator surfaces as children of the serve tree: the loop watch, then the
HTTP server (hypercorn's Trio worker) on `ops.host`:`ops.port`.

They start last, after everything they report on, and so stop first in a drain
(a service manager sees the port close: the serve is going) and restart with any
child before them (rest_for_one); /health then refuses for the moment of the
restart. `ops.port` 0 binds a free port, written to HERMES_HOME/ops.port for
clients and tests to find.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hermes.actors.actor import Actor
from hermes.actors.ref import Ref
from hermes.actors.snapshot import Snapshot
from hermes.actors.supervisor import ChildSpec
from hermes.adapters.listening import listen
from hermes.gateway.services import Services
from hermes.gateway.settings import Config
from hermes.gateway.tree import Surfaces, serve_token
from hermes.home import HermesHome, write_secret_file
from hermes.operations.context import Live
from hermes.ops.app import OpsView, build_app
from hermes.ops.auth import Gate
from hermes.ops.watchdog import LoopWatch
from hermes.state.db import Db

log = logging.getLogger(__name__)


class OpsServer(Actor):
    def __init__(self, view: OpsView, host: str, port: int, on_bound: Callable[[int], None]):
        super().__init__()
        self.view = view
        self.host, self.port = host, port
        self.on_bound = on_bound

    async def on_start(self) -> None:
        await self.exits.enter_async_context(self.view.db)
        port = await listen(
            self.nursery, build_app(self.view), self.host, self.port, "ops.port", "hermes.ops.http"
        )
        self.on_bound(port)
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning(
                "operator surfaces bound to %s: beyond loopback, plain HTTP carries the"
                " token; put TLS in front of it",
                self.host,
            )
        log.info("operator surfaces on http://%s:%d/ (/health, /ready, /metrics)", self.host, port)


def ops_children(home: HermesHome, config: Config) -> Surfaces:
    """The children `hermes serve` adds to the tree for the operator surfaces."""
    ops = config.ops

    def children(services: Services, live: Live) -> list[ChildSpec]:
        watchdog = Ref("watchdog", LoopWatch)

        def tree() -> Snapshot:
            return services.root.get().snapshot()

        def watch() -> LoopWatch:
            return LoopWatch(ops.freeze_seconds, tree, services.state.get(), home.state_db)

        def server() -> OpsServer:
            gate = Gate(serve_token(home), services.clock)
            db = Db(services.state.get(), home.state_db)
            view = OpsView(services, live, db, watchdog.get(), gate, config)
            return OpsServer(view, ops.bind_host(), ops.port, bound)

        def bound(port: int) -> None:
            write_secret_file(home.ops_port, f"{port}\n")

        return [
            ChildSpec("watchdog", watch, shutdown=2.0, ref=watchdog),
            ChildSpec("ops", server, shutdown=3.0),
        ]

    return children
