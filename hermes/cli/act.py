"""How a CLI command runs an operator action: in serve when serve runs, else here.

A change is sent to a running serve over its local endpoint (with the serve
token), so the actor that owns the state acts at once (the scheduler
re-plans, the outbox sends). With no serve, or for a read, the same action
runs here on state.db through a writer of this process's own. Either way the
command gets the action's own result type, or an error of the same family.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from hermes.actors.clock import Clock
from hermes.actors.errors import HermesError
from hermes.gateway.pidfile import serve_holds
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import Offline, Ops
from hermes.operations.wire import operation
from hermes.state.db import Db
from hermes.state.registry import Registry


@asynccontextmanager
async def open_state(home: HermesHome) -> AsyncIterator[Db]:
    """state.db through a writer of this process (created and migrated if need be). An
    error of the caller's comes out as itself, not wrapped in the registry's nursery."""
    registry = Registry()
    failed: HermesError | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        try:
            async with Db(registry, home.state_db) as db:
                try:
                    yield db
                except HermesError as exc:
                    failed = exc
        finally:
            registry.request_drain(trio.current_time() + 30)
    if failed is not None:
        raise failed


async def run_here(home: HermesHome, config: Config, name: str, args: Any) -> Any:
    op = operation(name)
    async with open_state(home) as db:
        return await op.run(Ops(db, Clock(), config, Offline(), "cli"), args)


def perform(home: HermesHome, config: Config, name: str, args: Any) -> Any:
    """Run the action where it belongs: a change in the running serve, if one holds this
    home; everything else here."""
    if operation(name).changes and serve_holds(home.serve_pid):
        from hermes.cli.client import ask_serve  # the WebSocket client: only for serve

        return trio.run(ask_serve, home, config, name, args)
    home.ensure()
    return trio.run(run_here, home, config, name, args)
