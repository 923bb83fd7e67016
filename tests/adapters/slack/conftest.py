"""Fixtures of the Slack tests: the fake model, the fake Slack, and serve."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.slack.serving import SlackServe
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def serve(home, model, slack) -> Iterator[SlackServe]:
    running = SlackServe(home, slack, model)
    running.configure()
    try:
        yield running
    finally:
        running.close()
