"""A platform's adapter in the test's process, under a supervisor as the gateway tree runs it
(a TRANSIENT child, restarted with a short backoff), against the platform's fake, with an
`admit` the test controls and, when asked, what it keeps in a real state.db.

The fakes serve real sockets from their own threads, so these tests run on real time:
they wait on the fake's conditions (in a worker thread) and on trio events, never on a
sleep. A test that needs time to pass in the adapter (an admission longer than the
progress deadline, Telegram's retry_after) runs on `jump_clock` (tests/adapters/
conftest.py), real time that the test moves on at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from hermes.actors.address import Address
from hermes.actors.backoff import Backoff
from hermes.actors.link import LinkStatus
from hermes.actors.ref import Ref
from hermes.actors.reply import Reply
from hermes.actors.supervisor import ChildSpec, Restart, Supervisor
from hermes.adapters.base import AdapterFactory, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import Cursor, InboundEvent, Send, SendRequest, SendResult
from hermes.adapters.cursors import Cursors
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets


class Admissions:
    """An admit that records the event ids it was given, in order, and when (`times`, trio
    time). `hold(text)` keeps the admission of the message with that text waiting until
    `release(text)`; `fail(text)` makes a held one raise instead (the journal could not
    take it: the connection crashes)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.events: list[InboundEvent] = []
        self.times: list[float] = []
        self._held: dict[str, trio.Event] = {}
        self._failing: set[str] = set()
        self._changed = trio.Event()

    def hold(self, text: str) -> None:
        self._held[text] = trio.Event()

    def release(self, text: str) -> None:
        self._held.pop(text).set()

    def fail(self, text: str) -> None:
        self._failing.add(text)
        self.release(text)

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        self.ids.append(event.event_id)
        self.events.append(event)
        self.times.append(trio.current_time())
        self._changed.set()
        self._changed = trio.Event()
        held = self._held.get(event.text)
        if held is not None:
            await held.wait()
        if event.text in self._failing:
            self._failing.discard(event.text)
            raise RuntimeError("journal unavailable")
        return True

    async def wait_for(self, *event_ids: str, timeout: float = 10.0, times: int = 1) -> None:
        """Until every one of `event_ids` reached admission (held ones included) `times`
        times each."""
        with trio.fail_after(timeout):
            while any(self.ids.count(event_id) < times for event_id in event_ids):
                await self._changed.wait()

    def event(self, event_id: str) -> InboundEvent:
        """The last admission of `event_id`."""
        return next(e for e in reversed(self.events) if e.event_id == event_id)

    def first_time(self, event_id: str) -> float:
        """When `event_id` first reached admission."""
        return self.times[self.ids.index(event_id)]


class WatchedStatus(LinkStatus):
    """An LinkStatus that remembers every state it went through and wakes waiters."""

    def __init__(self) -> None:
        object.__setattr__(self, "history", [])
        object.__setattr__(self, "_changed", trio.Event())
        super().__init__()

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "state":
            self.history.append(value)
            self._changed.set()
            object.__setattr__(self, "_changed", trio.Event())

    async def reach(self, state: str, *, timeout: float = 10.0) -> None:
        """Until the status has been `state`."""
        with trio.fail_after(timeout):
            while state not in self.history:
                await self._changed.wait()


@attrs.define
class Running:
    name: str
    supervisor: Supervisor
    status: WatchedStatus
    incarnations: list[PlatformAdapter]
    adapter: Ref[Address]

    @property
    def restarts(self) -> int:
        return self.supervisor.snapshot().children[0].restarts

    async def send(self, request: SendRequest) -> SendResult:
        """One send through the running adapter, as the outbox hands it over."""
        reply = Reply()
        await self.adapter.get().cast(Send(request, reply))
        return await reply.wait()


@asynccontextmanager
async def running(
    adapter: AdapterFactory,
    name: str,
    config: PlatformConfig,
    secrets: Secrets,
    admit: Callable[[InboundEvent], Any],
    *,
    cursors: Callable[[], Cursors] | None = None,
    named_users: frozenset[str] = frozenset(),
) -> AsyncIterator[Running]:
    """`adapter` as the platform `name`; `cursors` makes each incarnation's state.db handle;
    `named_users`: who gateway.owners and gateway.allowed_users name on it."""
    status = WatchedStatus()
    incarnations: list[PlatformAdapter] = []

    def make() -> PlatformAdapter:
        kept = None if cursors is None else cursors()
        setup = AdapterSetup(name, config, secrets, status, admit, kept, named_users=named_users)
        incarnations.append(adapter(setup))
        return incarnations[-1]

    ref = Ref(name, Address)
    spec = ChildSpec(name, make, restart=Restart.TRANSIENT, shutdown=2.0, ref=ref)
    supervisor = Supervisor(
        "platforms", [spec], max_restarts=20, period=10.0, backoff=Backoff(0.05, 0.2)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield Running(name, supervisor, status, incarnations, ref)
        supervisor.drain(trio.current_time() + 3)
