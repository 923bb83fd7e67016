"""Fixtures of the Teams tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.teams.serving import TeamsServe
from tests.fakes.teams import FakeTeams


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture
def serve(home, model, teams) -> Iterator[TeamsServe]:
    with serving(TeamsServe, teams, home, model) as running:
        yield running
