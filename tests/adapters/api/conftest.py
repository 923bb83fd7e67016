"""The API's serve: a real `hermes serve` with `platforms.api`, the fake model beside it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.api.serving import CLIENT, ApiServe
from tests.adapters.serving import serving


@pytest.fixture
def api(home, model) -> Iterator[ApiServe]:
    with serving(ApiServe, CLIENT, home, model) as serve:
        yield serve
