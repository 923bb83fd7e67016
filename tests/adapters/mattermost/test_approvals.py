"""Approvals on Mattermost end to end (tests/adapters/approvals_flow.py): a message
attachment's buttons under the prompt, each press posted by the server to the listener
(through the reverse proxy the public URL names) and admitted before it is answered."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.approvals_flow import QUIET, SETTINGS, Shown, the_approvals_story
from tests.fakes.mattermost import FakeMattermost

ANN, BOB, DM = "ann", "bob", "dm-ann"
TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"


class MattermostChat:
    """Ann's DM with the bot; Bob presses in it too (the fake does not mind)."""

    def __init__(self, fake: FakeMattermost) -> None:
        self.fake = fake

    def say(self, text: str, owner: bool = True) -> None:
        self.fake.message(text, user=ANN if owner else BOB, channel=DM)

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        assert self.fake.press(message.record["id"], command, user=ANN if owner else BOB) == 200

    def shown(self) -> list[Shown]:
        return [Shown(s["message"], _commands(s), s) for s in self.fake.sent]

    def wait_shown(self, count: int) -> None:
        self.fake.wait_sent(count, 30.0)

    def wait_connected(self, count: int) -> None:
        self.fake.wait_authenticated(count)


def _commands(sent: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        action["integration"]["context"]["command"]
        for attachment in (sent.get("props") or {}).get("attachments") or ()
        for action in attachment.get("actions") or ()
    )


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_approvals_with_attachment_buttons(serve, model, mattermost, tmp_path):
    serve.configure(access=TEAM, top=SETTINGS, platform=QUIET)
    await the_approvals_story(
        serve, model, MattermostChat(mattermost), tmp_path, f"mattermost {ANN} ({ANN})"
    )
    assert [p["status"] for p in mattermost.presses] == [200, 200, 200]
