"""MemoryStore: caps, and the prompt block kept between turns."""

from __future__ import annotations

import pytest

from hermes.agent.memory import RECHECK_SECONDS, MemoryRefused, MemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_change_through_the_store_shows_in_the_next_prompt_at_once(tmp_path):
    store = MemoryStore(tmp_path, clock=Clock())
    assert store.prompt_block() == ""
    store.add("user", "prefers tea")
    assert store.prompt_block() == "## About the user\n- prefers tea"


def test_an_edit_by_hand_shows_within_the_recheck_interval(tmp_path):
    clock = Clock()
    store = MemoryStore(tmp_path, clock=clock)
    store.add("memory", "first")
    assert "- first" in store.prompt_block()
    (tmp_path / "MEMORY.md").write_text("- first\n- edited by hand\n")
    clock.now += RECHECK_SECONDS / 2
    assert "edited by hand" not in store.prompt_block()  # not looked at yet
    clock.now += RECHECK_SECONDS
    assert "- edited by hand" in store.prompt_block()


def test_the_cap_refuses_and_keeps_the_file(tmp_path):
    store = MemoryStore(tmp_path)
    store.add("user", "short")
    with pytest.raises(MemoryRefused, match="over its cap"):
        store.add("user", "x" * 2000)
    assert (tmp_path / "USER.md").read_text() == "- short\n"
