"""Approvals on Teams end to end (tests/adapters/approvals_flow.py): an Adaptive Card with
an Action.Submit per button under the prompt, a press coming back as a message activity
whose `value` is the button's data, admitted before its 200."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.approvals_flow import QUIET, SETTINGS, Shown, the_approvals_story
from tests.adapters.teams.serving import ANN, BOB
from tests.fakes.teams import FakeTeams

TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"


class TeamsChat:
    """Ann's personal chat with the bot; Bob presses on its cards too (the fake lets him)."""

    def __init__(self, teams: FakeTeams) -> None:
        self.teams = teams

    def say(self, text: str, owner: bool = True) -> None:
        self.teams.message(text, user=ANN if owner else BOB, name="Ann" if owner else "Bob")

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        record = message.record
        self.teams.message(user=ANN if owner else BOB, name="Ann" if owner else "Bob",
                           value={"hermes": command}, reply_to=record["id"],
                           conversation=record["conversation"])  # fmt: skip

    def shown(self) -> list[Shown]:
        return [Shown(*_read(s), s) for s in self.teams.sent]

    def wait_shown(self, count: int) -> None:
        self.teams.wait_sent(count, 30.0)

    def wait_connected(self, count: int) -> None:
        self.teams.wait_until(lambda f: f.metadata_fetches >= count, what="serve connected")


def _read(sent: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A message's text and its buttons' commands (a card's TextBlock and actions)."""
    for attachment in sent["attachments"]:
        if attachment["contentType"] == "application/vnd.microsoft.card.adaptive":
            card = attachment["content"]
            commands = tuple(a["data"]["hermes"] for a in card["actions"])
            return card["body"][0]["text"], commands
    return sent["text"] or "", ()


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_approvals_with_adaptive_card_buttons(serve, model, teams, tmp_path):
    serve.configure(access=TEAM, top=SETTINGS, platform=QUIET)
    await the_approvals_story(serve, model, TeamsChat(teams), tmp_path, f"teams {ANN} (Ann)")
