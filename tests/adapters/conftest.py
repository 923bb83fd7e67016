"""Fixtures of the adapter tests: the fake model, a clock a test can move on, and serve on
the fake Telegram (tests/conftest.py's `tg`): the platform the tests of what lies behind
the seam (restart recovery, the outbox across a kill) run on. tests/adapters/slack and
tests/adapters/discord have their own `serve`, on their platform's fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from tests.adapters.serving import serving
from tests.adapters.telegram.serving import TelegramServe
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def jump_clock() -> trio.testing.MockClock:
    """Real time (rate 1) that the test moves on at once with `jump_clock.jump(seconds)`: for
    an adapter in this process against a fake, whose threads live on real time, while what
    the adapter waits for (a held admission, Telegram's retry_after) takes longer than a
    test should. Autojump cannot serve there: it would fire the progress deadline of every
    connection whose poll the fake holds in real time."""
    return trio.testing.MockClock(rate=1.0)


@pytest.fixture
def serve(home, model, tg) -> Iterator[TelegramServe]:
    with serving(TelegramServe, tg, home, model) as running:
        yield running
