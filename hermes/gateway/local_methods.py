"""The local endpoint's methods other than chat: every operator action, by its name.

This surface only parses and renders: the action is the operations layer's
(hermes.operations.catalog), run with serve's live actors; its errors become
JSON-RPC errors by family, their class and family in `data`, so the CLI that
sent the action reads back the same error. Chat goes through the endpoint's
admission like any platform's message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes.actors.clock import Clock
from hermes.actors.errors import HermesError, Invalid, Unavailable
from hermes.adapters.local.endpoint import Client
from hermes.adapters.local.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    SERVER_BUSY,
    RpcError,
)
from hermes.gateway.settings import Config
from hermes.operations.context import Live, Ops
from hermes.operations.cron import AddArgs
from hermes.operations.wire import (
    UnknownAction,
    error_to_json,
    operation,
    parse_args,
    result_to_json,
)
from hermes.state.db import UsesDb
from hermes.state.registry import Registry


def rpc_error(exc: HermesError) -> RpcError:
    """An action's error as JSON-RPC answers it: the code by family, the rest in data."""
    if isinstance(exc, UnknownAction):
        code = METHOD_NOT_FOUND
    elif isinstance(exc, Invalid):
        code = INVALID_PARAMS
    elif isinstance(exc, Unavailable):
        code = SERVER_BUSY
    else:
        code = INTERNAL_ERROR
    return RpcError(code, str(exc), error_to_json(exc))


class Methods(UsesDb):
    """Held open by the endpoint (`async with`: their state.db handle)."""

    def __init__(
        self, registry: Registry, state_db: Path, clock: Clock, config: Config, live: Live
    ) -> None:
        super().__init__(registry, state_db)
        self.clock = clock
        self.config = config
        self.live = live

    async def __call__(self, client: Client, method: str, params: dict[str, Any]) -> Any:
        try:
            op = operation(method)
            args = parse_args(op, params)
            result = await op.run(Ops(self.db, self.clock, self.config, self.live, "local"), args)
        except HermesError as exc:
            raise rpc_error(exc) from None
        if isinstance(args, AddArgs) and args.session:
            client.sessions.add(args.session)  # the job's briefs reach this connection
        return result_to_json(result)
