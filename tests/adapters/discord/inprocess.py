"""The Discord adapter in the test's process, under a supervisor as the gateway tree runs
it (a TRANSIENT child, restarted with a short backoff), against the fake Discord, with
an `admit` the test controls and, when asked, its session kept in a real state.db.

The fake serves real sockets from its own threads, so these tests run on the real
clock; they wait on the fake's conditions (in a worker thread) and on trio events,
never on a sleep.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from hermes.actors.backoff import Backoff
from hermes.actors.supervisor import ChildSpec, Restart, Supervisor
from hermes.adapters.base import AdapterSetup, AdapterStatus
from hermes.adapters.contract import InboundEvent
from hermes.adapters.cursors import Cursors
from hermes.adapters.discord.adapter import DiscordAdapter
from hermes.config import PlatformConfig, Secrets
from tests.fakes.discord import TOKEN, FakeDiscord

NAME = "discord"
TOKEN_VAR = "DISCORD_BOT_TOKEN"


class QuickDiscord(DiscordAdapter):
    """Early failures back off in tenths of a second, not in seconds."""

    reconnect_backoff = Backoff(0.05, 0.4)


class Admissions:
    """An admit that records the message ids it was given, in order. `hold(text)` keeps
    the admission of the message with that text waiting until `release(text)`;
    `fail(text)` makes a held one raise instead (the journal could not take it: the
    connection crashes)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
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

    async def __call__(self, event: InboundEvent) -> bool:
        self.ids.append(event.event_id)
        self._changed.set()
        self._changed = trio.Event()
        held = self._held.get(event.text)
        if held is not None:
            await held.wait()
        if event.text in self._failing:
            self._failing.discard(event.text)
            raise RuntimeError("journal unavailable")
        return True

    async def wait_for(self, *message_ids: str, timeout: float = 10.0) -> None:
        """Until every one of `message_ids` reached admission (held ones included)."""
        with trio.fail_after(timeout):
            while not set(message_ids) <= set(self.ids):
                await self._changed.wait()


@attrs.define
class Running:
    supervisor: Supervisor
    status: AdapterStatus
    incarnations: list[DiscordAdapter]

    @property
    def restarts(self) -> int:
        return self.supervisor.snapshot().children[0].restarts


@asynccontextmanager
async def running(
    discord: FakeDiscord,
    admit: Callable[[InboundEvent], Any],
    *,
    adapter: type[DiscordAdapter] = QuickDiscord,
    cursors: Callable[[], Cursors] | None = None,
) -> AsyncIterator[Running]:
    """`adapter` on the fake; `cursors` makes each incarnation's state.db handle."""
    config = PlatformConfig(token_env=TOKEN_VAR, base_url=discord.url)
    secrets = Secrets({TOKEN_VAR: TOKEN}, frozenset())
    status = AdapterStatus()
    incarnations: list[DiscordAdapter] = []

    def make() -> DiscordAdapter:
        kept = None if cursors is None else cursors()
        incarnations.append(adapter(AdapterSetup(NAME, config, secrets, status, admit, kept)))
        return incarnations[-1]

    spec = ChildSpec(NAME, make, restart=Restart.TRANSIENT, shutdown=2.0)
    supervisor = Supervisor(
        "platforms", [spec], max_restarts=20, period=10.0, backoff=Backoff(0.05, 0.2)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield Running(supervisor, status, incarnations)
        supervisor.drain(trio.current_time() + 3)
