"""Fixtures of the Slack tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.slack.serving import SlackServe
from tests.fakes.slack import FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def serve(home, model, slack) -> Iterator[SlackServe]:
    with serving(SlackServe, slack, home, model) as running:
        yield running
