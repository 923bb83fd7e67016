"""Live replies on Matrix end to end (tests/adapters/live_flow.py): an edit is an
`m.replace` event whose `m.new_content` is what the message reads now; in a DM in the
clear, so the fake sees the texts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.adapters import live_flow
from tests.fakes.matrix import ALICE, HERMES, FakeMatrix


class MatrixChat:
    platform = "matrix"

    def __init__(self, hs: FakeMatrix) -> None:
        self.hs = hs
        self.room = hs.create_room([ALICE, HERMES], direct=True)

    def say(self, text: str) -> None:
        self.hs.message(self.room, ALICE, text)

    def _mine(self) -> list[dict[str, Any]]:
        return [s for s in self.hs.sent if s["room"] == self.room and s["sender"] == HERMES
                and s["type"] == "m.room.message"]  # fmt: skip

    @staticmethod
    def _replaces(sent: dict[str, Any]) -> str | None:
        related = sent["content"].get("m.relates_to") or {}
        return related.get("event_id") if related.get("rel_type") == "m.replace" else None

    def now(self) -> list[str]:
        shown: dict[str, str] = {}  # by the original event, in the order they were sent
        for sent in self._mine():
            edited = self._replaces(sent)
            if edited is None:
                shown[sent["event_id"]] = sent["content"]["body"]
            else:
                shown[edited] = sent["content"]["m.new_content"]["body"]
        return list(shown.values())

    def edits(self) -> list[str]:
        return [s["content"]["m.new_content"]["body"] for s in self._mine() if self._replaces(s)]

    def texts(self) -> list[str]:
        sent = [s["content"]["body"] for s in self._mine() if not self._replaces(s)]
        return sent + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.hs.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        self.hs.wait_syncs(count + 1, 30.0, user=HERMES)  # its first sync answered


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, hs, story):
    await story(serve, model, MatrixChat(hs))
