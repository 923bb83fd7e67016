"""Declaring a capability puts a platform under its shared flow: every platform whose
record says it edits runs the live-reply stories (tests/adapters/live_flow.py) in its
own `test_live.py`. A platform that declares edits without them fails here."""

from __future__ import annotations

import importlib

import pytest

from hermes.adapters.registry import chat_platforms
from tests.adapters import live_flow


@pytest.mark.parametrize("name", sorted(n for n, p in chat_platforms().items() if p.edits))
def test_a_platform_that_edits_runs_every_live_reply_story(name):
    module = importlib.import_module(f"tests.adapters.{name}.test_live")
    marks = {m.name: m for m in module.test_live_replies.pytestmark}
    assert list(marks["parametrize"].args[1]) == live_flow.STORIES
