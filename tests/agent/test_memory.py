"""MemoryStore: caps, and the prompt block kept between turns."""

from __future__ import annotations

import pytest

from hermes.agent.memory import (
    RECHECK_SECONDS,
    Memory,
    MemoryRefused,
    MemoryStore,
    adopt,
    person_directory,
    user_directory,
)


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


def test_a_user_writes_only_their_own_memory_and_reads_the_owners_notes(tmp_path):
    shared = MemoryStore(tmp_path)
    owner = Memory(shared)
    owner.add("memory", "the house rules")
    owner.add("user", "the owner likes tea")
    bob = Memory(shared, MemoryStore(user_directory(tmp_path, "tg", "../bob")))
    bob.add("memory", "bob's note")
    bob.add("user", "bob likes coffee")
    with pytest.raises(MemoryRefused):
        bob.remove("memory", "house rules")  # not his to change
    assert (tmp_path / "MEMORY.md").read_text() == "- the house rules\n"
    block = bob.prompt_block()
    assert "the house rules" in block and "bob likes coffee" in block and "bob's note" in block
    assert "tea" not in block  # the owner's USER.md is not shown to others
    assert "bob" not in owner.prompt_block()
    assert user_directory(tmp_path, "tg", "../bob").parent == tmp_path / "tg"  # no way out


def test_a_linked_persons_memory_starts_from_each_accounts_entries(tmp_path):
    """Both accounts' entries, each once, in order; a full file keeps what fits."""
    tg = MemoryStore(user_directory(tmp_path, "telegram", "1"))
    sl = MemoryStore(user_directory(tmp_path, "slack", "U2"))
    tg.add("user", "their boat is blue")
    tg.add("memory", "prefers metric")
    sl.add("user", "their boat is blue")
    sl.add("user", "lives by the sea")
    adopt(tmp_path, "p_1", [("telegram", "1"), ("slack", "U2")])
    linked = MemoryStore(person_directory(tmp_path, "p_1"))
    assert linked.entries("user") == ["their boat is blue", "lives by the sea"]
    assert linked.entries("memory") == ["prefers metric"]
    assert tg.entries("user") == ["their boat is blue"]  # the accounts' own stay
