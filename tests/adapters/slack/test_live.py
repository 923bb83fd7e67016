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


@pytest.mark.timeout(60)
async def test_a_streamed_answer_is_one_message(serve, model, slack):
    await live_flow.a_streamed_answer_is_one_message_edited_at_most_once_an_interval(
        serve, model, SlackChat(slack)
    )


@pytest.mark.timeout(60)
async def test_a_long_answer_is_split(serve, model, slack):
    await live_flow.a_long_answer_ends_split_the_platforms_way(serve, model, SlackChat(slack))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["stream", "tools"])
async def test_tool_lines(serve, model, slack, mode):
    await live_flow.tool_lines_show_as_the_mode_says(serve, model, SlackChat(slack), mode)


@pytest.mark.timeout(60)
async def test_off_sends_one_message(serve, model, slack):
    await live_flow.off_sends_one_message(serve, model, SlackChat(slack))


@pytest.mark.timeout(90)
async def test_a_kill_mid_stream_ends_with_one_answer(serve, model, slack):
    await live_flow.a_kill_mid_stream_ends_with_one_complete_answer(serve, model, SlackChat(slack))
