"""Fixtures for agent tests: a ready ToolContext."""

from __future__ import annotations

import pytest

from hermes.agent.memory import Memory, MemoryStore
from hermes.agent.permissions import Caller
from hermes.agent.tools.base import ToolContext
from hermes.state.db import Db
from hermes.terminal.session import TerminalSession


@pytest.fixture
async def ctx(home, registry):
    async with Db(registry, home.state_db) as db:
        yield ToolContext(
            "s1",
            db,
            TerminalSession(home.root, state_dir=home.root / ".term"),
            Memory(MemoryStore(home.memories)),
            Caller("local", "", "owner"),
        )
