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


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, discord, story):
    await story(serve, model, DiscordChat(discord))
