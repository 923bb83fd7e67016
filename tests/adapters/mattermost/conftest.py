"""Fixtures of the Mattermost tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.mattermost.serving import MattermostServe
from tests.adapters.serving import serving
from tests.fakes.mattermost import FakeMattermost


@pytest.fixture
def mattermost() -> Iterator[FakeMattermost]:
    with FakeMattermost() as fake:
        yield fake


@pytest.fixture
def serve(home, model, mattermost) -> Iterator[MattermostServe]:
    with serving(MattermostServe, mattermost, home, model) as running:
        yield running
