"""Approvals on Slack end to end (tests/adapters/approvals_flow.py): Block Kit buttons under
the prompt, presses as `interactive` envelopes admitted before their ack."""

from __future__ import annotations

import html
from typing import Any

import pytest

from tests.adapters.approvals_flow import QUIET, SETTINGS, Shown, the_approvals_story
from tests.fakes.slack import FakeSlack

ANN, BOB, DM = "U1", "U2", "D7"
TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"


class SlackChat:
    """Ann's DM with the app; Bob presses in it too (the fake does not mind)."""

    def __init__(self, slack: FakeSlack) -> None:
        self.slack = slack

    def say(self, text: str, owner: bool = True) -> None:
        self.slack.message(text, user=ANN if owner else BOB, channel=DM)

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        self.slack.press(message.record, command, user=ANN if owner else BOB)

    def shown(self) -> list[Shown]:
        return [Shown(html.unescape(s["text"]), _commands(s), s) for s in self.slack.sent]

    def wait_shown(self, count: int) -> None:
        self.slack.wait_sent(count, 30.0)

    def wait_connected(self, count: int) -> None:
        self.slack.wait_connections(count)


def _commands(sent: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        element["value"]
        for block in sent.get("blocks") or ()
        if block.get("type") == "actions"
        for element in block["elements"]
    )


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_approvals_with_block_kit_buttons(serve, model, slack, tmp_path):
    serve.configure(access=TEAM, top=SETTINGS, platform=QUIET)
    await the_approvals_story(serve, model, SlackChat(slack), tmp_path, f"slack {ANN} (u1)")
    assert len(slack.acked) == 3 + 6  # the three presses and six messages, each acked once
