"""Approvals on Discord end to end (tests/adapters/approvals_flow.py): message components
under the prompt, presses as INTERACTION_CREATE acknowledged within Discord's 3 seconds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.approvals_flow import QUIET, SETTINGS, Shown, the_approvals_story
from tests.fakes.discord import FakeDiscord

ANN, BOB, DM = "1001", "2002", "2001"
TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"


class DiscordChat:
    """Ann's DM with the bot; Bob presses in it too (the fake does not mind)."""

    def __init__(self, discord: FakeDiscord) -> None:
        self.discord = discord

    def say(self, text: str, owner: bool = True) -> None:
        self.discord.message(text, channel_id=DM, author_id=ANN if owner else BOB)

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        self.discord.press(message.record, command, user_id=ANN if owner else BOB)

    def shown(self) -> list[Shown]:
        return [Shown(s.get("content") or "", _commands(s), s) for s in self.discord.sent]

    def wait_shown(self, count: int) -> None:
        self.discord.wait_sent(count, 30.0)

    def wait_connected(self, count: int) -> None:
        if count == 1:
            self.discord.wait_identifies(1, 30.0)  # else what is said first is lost
        else:
            self.discord.wait_connections(count)


def _commands(sent: dict[str, Any]) -> tuple[str, ...]:
    return tuple(b["custom_id"] for row in sent.get("components") or () for b in row["components"])


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_approvals_with_message_components(serve, model, discord, tmp_path):
    serve.configure(access=TEAM, top=SETTINGS, platform=QUIET)
    ann = f"discord {ANN} (user{ANN})"  # as the fake names a presser
    await the_approvals_story(serve, model, DiscordChat(discord), tmp_path, ann)
    callbacks = discord.callbacks
    assert [c["type"] for c in callbacks] == [6, 6, 6] and all(c["in_time"] for c in callbacks)
