"""A live Registry per test, on real SQLite files under tmp_path."""

from __future__ import annotations

import pytest
import trio

from hermes.state.registry import Registry


@pytest.fixture
async def registry():
    reg = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(reg.run)
        yield reg
        reg.request_drain(trio.current_time() + 30)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "state.db"
