"""Fixtures of the adapter tests: the fake model and a restartable serve with the test
platform (tests/adapters/serving.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import TOKEN, Serve, serving
from tests.fakes.chat_platform import FakeChatPlatform
from tests.fakes.openai import FakeOpenAI


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def serve(home, model) -> Iterator[Serve]:
    with (
        FakeChatPlatform(token=TOKEN) as platform,
        serving(Serve, platform, home, model) as running,
    ):
        yield running
