"""The local endpoint alone in a test: its token, no methods, and what it admitted."""

from __future__ import annotations

import trio

from hermes.actors.link import LinkStatus
from hermes.adapters.contract import Cursor, InboundEvent
from hermes.adapters.local.endpoint import LocalEndpoint
from hermes.adapters.local.jsonrpc import METHOD_NOT_FOUND, RpcError

TOKEN = "t0ken"
HEADERS = [(b"authorization", f"Bearer {TOKEN}".encode())]


async def no_methods(client, method, params):
    raise RpcError(METHOD_NOT_FOUND, method)


class Admissions:
    """The endpoint's `admit`: keeps every event; `next()` waits for the next one."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self._arrived = trio.Event()

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        self.events.append(event)
        self._arrived.set()
        return True

    async def next(self) -> InboundEvent:
        await self._arrived.wait()
        self._arrived = trio.Event()
        return self.events[-1]


def local_endpoint(admissions: Admissions) -> LocalEndpoint:
    return LocalEndpoint("127.0.0.1", 0, TOKEN, no_methods, LinkStatus(), admissions)
