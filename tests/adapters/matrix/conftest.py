"""Fixtures of the Matrix tests: the fake homeserver, Alice's client, and serve on the
fake (the fake model is tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.matrix.serving import MatrixServe, element
from tests.adapters.serving import serving
from tests.fakes.matrix import FakeMatrix
from tests.fakes.matrix_client import ElementClient


@pytest.fixture
def hs() -> Iterator[FakeMatrix]:
    with FakeMatrix() as fake:
        yield fake


@pytest.fixture
def alice(hs) -> Iterator[ElementClient]:
    with element(hs) as client:
        yield client


@pytest.fixture
def serve(home, model, hs) -> Iterator[MatrixServe]:
    with serving(MatrixServe, hs, home, model) as running:
        yield running
