"""Fixtures of the inbound webhooks' tests: serve with its routes beside Telegram (the fake
Bot API is tests/conftest.py's `tg`, the fake model tests/adapters/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.serving import serving
from tests.adapters.webhook.serving import WebhookServe


@pytest.fixture
def serve(home, model, tg) -> Iterator[WebhookServe]:
    with serving(WebhookServe, tg, home, model) as running:
        yield running
