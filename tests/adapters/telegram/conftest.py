"""Fixtures of the Telegram tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.telegram.serving import TOKEN, TelegramServe
from tests.fakes.telegram import FakeTelegram


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def serve(home, model, tg) -> Iterator[TelegramServe]:
    with serving(TelegramServe, tg, home, model) as running:
        yield running
