"""Fixtures of the WhatsApp tests: its fake, and serve on it (the fake model is
tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.whatsapp.serving import WhatsAppServe
from tests.fakes.whatsapp import FakeWhatsApp


@pytest.fixture
def wa() -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp() as fake:
        yield fake


@pytest.fixture
def serve(home, model, wa) -> Iterator[WhatsAppServe]:
    with serving(WhatsAppServe, wa, home, model) as running:
        yield running
