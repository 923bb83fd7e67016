"""Live replies on Mattermost end to end (tests/adapters/live_flow.py): PUT posts/patch."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.fakes.mattermost import FakeMattermost

DM = "dm-ann"


class MattermostChat:
    platform = "mattermost"

    def __init__(self, fake: FakeMattermost) -> None:
        self.fake = fake

    def say(self, text: str) -> None:
        self.fake.message(text, user="ann")

    def now(self) -> list[str]:
        return [p["message"] for p in self.fake.posts_in(DM) if p["user_id"] != "ann"]

    def edits(self) -> list[str]:
        return [e["message"] for e in self.fake.edits if e["channel_id"] == DM]

    def texts(self) -> list[str]:
        return [s["message"] for s in self.fake.sent_to(DM)] + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.fake.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        self.fake.wait_authenticated(count)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, mattermost, story):
    await story(serve, model, MattermostChat(mattermost))
