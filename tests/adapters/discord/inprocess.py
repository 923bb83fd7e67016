"""The Discord adapter in the test's process (tests/adapters/inprocess.py) against the fake
Discord, with early failures backing off in tenths of a second."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from hermes.actors.backoff import Backoff
from hermes.adapters.contract import InboundEvent
from hermes.adapters.cursors import Cursors
from hermes.adapters.discord.adapter import DiscordAdapter
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets
from tests.adapters.discord.serving import TOKEN_VAR
from tests.adapters.inprocess import Running, running
from tests.fakes.discord import TOKEN, FakeDiscord

NAME = "discord"


class QuickDiscord(DiscordAdapter):
    """Early failures back off in tenths of a second, not in seconds."""

    reconnect_backoff = Backoff(0.05, 0.4)


@asynccontextmanager
async def running_discord(
    discord: FakeDiscord,
    admit: Callable[[InboundEvent], Any],
    *,
    adapter: type[DiscordAdapter] = QuickDiscord,
    cursors: Callable[[], Cursors] | None = None,
) -> AsyncIterator[Running]:
    """`adapter` on the fake; `cursors` makes each incarnation's state.db handle."""
    config = PlatformConfig(token_env=TOKEN_VAR, base_url=discord.url)
    secrets = Secrets({TOKEN_VAR: TOKEN}, frozenset())
    async with running(adapter, NAME, config, secrets, admit, cursors=cursors) as run:
        yield run
