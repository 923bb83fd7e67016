"""Fixtures of the Discord tests: the fake model, the fake Discord, and serve."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.discord.serving import DiscordServe
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def serve(home, model, discord) -> Iterator[DiscordServe]:
    running = DiscordServe(home, discord, model)
    running.configure()
    try:
        yield running
    finally:
        running.close()
