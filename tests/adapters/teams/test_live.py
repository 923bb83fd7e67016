"""Live replies on Teams end to end (tests/adapters/live_flow.py): the activity PUT in
place as the answer grows."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.adapters.teams.serving import ANN
from tests.fakes.teams import FakeTeams, personal

DM = personal(ANN)


class TeamsChat:
    platform = "teams"

    def __init__(self, teams: FakeTeams) -> None:
        self.teams = teams

    def say(self, text: str) -> None:
        self.teams.message(text)

    def now(self) -> list[str]:
        return [m["text"] or "" for m in self.teams.messages_in(DM)]

    def edits(self) -> list[str]:
        return [u["text"] or "" for u in self.teams.updates if u["conversation"] == DM]

    def texts(self) -> list[str]:
        return [s["text"] or "" for s in self.teams.sent_to(DM)] + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.teams.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        self.teams.wait_until(lambda f: f.metadata_fetches >= count, what="serve connected")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, teams, story):
    await story(serve, model, TeamsChat(teams))
