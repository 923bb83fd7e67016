"""Live replies on Slack end to end (tests/adapters/live_flow.py): chat.update."""

from __future__ import annotations

import html
from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.fakes.slack import FakeSlack

DM = "D7"


class SlackChat:
    platform = "slack"

    def __init__(self, slack: FakeSlack) -> None:
        self.slack = slack

    def say(self, text: str) -> None:
        self.slack.message(text, channel=DM)

    def now(self) -> list[str]:
        return [html.unescape(m["text"]) for m in self.slack.messages_in(DM)]

    def edits(self) -> list[str]:
        return [html.unescape(e["text"]) for e in self.slack.edits if e["channel"] == DM]

    def texts(self) -> list[str]:
        sent = [html.unescape(s["text"]) for s in self.slack.sent if s["channel"] == DM]
        return sent + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.slack.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        self.slack.wait_connections(count)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, slack, story):
    await story(serve, model, SlackChat(slack))
