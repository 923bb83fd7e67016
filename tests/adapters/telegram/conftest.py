"""Fixtures of the Telegram tests: the fake model, the fake Bot API, and serve."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.telegram.serving import TOKEN, TelegramServe
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def serve(home, model, tg) -> Iterator[TelegramServe]:
    running = TelegramServe(home, tg, model)
    running.configure()
    try:
        yield running
    finally:
        running.close()
