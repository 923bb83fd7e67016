"""Fixtures of the Signal tests: the fake daemon, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.signal.serving import KEEPALIVE, SignalServe
from tests.fakes.signal import FakeSignal


@pytest.fixture
def daemon() -> Iterator[FakeSignal]:
    with FakeSignal(keepalive=KEEPALIVE) as fake:
        yield fake


@pytest.fixture
def serve(home, model, daemon) -> Iterator[SignalServe]:
    with serving(SignalServe, daemon, home, model) as running:
        yield running
