"""Live replies on Discord end to end (tests/adapters/live_flow.py): message PATCH."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.fakes.discord import FakeDiscord

DM = "2001"


class DiscordChat:
    platform = "discord"

    def __init__(self, discord: FakeDiscord) -> None:
        self.discord = discord

    def say(self, text: str) -> None:
        self.discord.message(text, channel_id=DM)

    def now(self) -> list[str]:
        return [m["content"] for m in self.discord.messages_in(DM)]

    def edits(self) -> list[str]:
        return [e["content"] for e in self.discord.edits if e["channel_id"] == DM]

    def texts(self) -> list[str]:
        sent = [s["content"] for s in self.discord.sent if s["channel_id"] == DM]
        return sent + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.discord.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        if count == 1:
            self.discord.wait_identifies(1, 30.0)  # else what is said first is lost
        else:
            self.discord.wait_connections(count)


@pytest.mark.timeout(60)
async def test_a_streamed_answer_is_one_message(serve, model, discord):
    await live_flow.a_streamed_answer_is_one_message_edited_at_most_once_an_interval(
        serve, model, DiscordChat(discord)
    )


@pytest.mark.timeout(60)
async def test_a_long_answer_is_split(serve, model, discord):
    await live_flow.a_long_answer_ends_split_the_platforms_way(serve, model, DiscordChat(discord))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["stream", "tools"])
async def test_tool_lines(serve, model, discord, mode):
    await live_flow.tool_lines_show_as_the_mode_says(serve, model, DiscordChat(discord), mode)


@pytest.mark.timeout(60)
async def test_off_sends_one_message(serve, model, discord):
    await live_flow.off_sends_one_message(serve, model, DiscordChat(discord))


@pytest.mark.timeout(90)
async def test_a_kill_mid_stream_ends_with_one_answer(serve, model, discord):
    await live_flow.a_kill_mid_stream_ends_with_one_complete_answer(
        serve, model, DiscordChat(discord)
    )
