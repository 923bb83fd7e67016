"""Fixtures of the Discord tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.discord.serving import DiscordServe
from tests.adapters.serving import serving
from tests.fakes.discord import FakeDiscord


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def serve(home, model, discord) -> Iterator[DiscordServe]:
    with serving(DiscordServe, discord, home, model) as running:
        yield running
