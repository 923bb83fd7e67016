"""A send's buttons as an Adaptive Card: the text in a TextBlock (Markdown, as Teams renders
it in cards), then one Action.Submit per Button whose `data` is `{"hermes": command}`, so
a press comes back as a `message` activity with that `value` (hermes/adapters/teams/
inbound.py)."""

from __future__ import annotations

from typing import Any

from hermes.adapters.contract import Button
from hermes.adapters.teams.inbound import BUTTON_KEY

ADAPTIVE = "application/vnd.microsoft.card.adaptive"
VERSION = "1.4"  # the newest Teams renders on every client
MAX_ACTIONS = 6  # Teams shows at most six actions on a card


def card(text: str, buttons: tuple[Button, ...]) -> dict[str, Any]:
    """The attachment of an Adaptive Card showing `text` with `buttons`."""
    actions = [
        {"type": "Action.Submit", "title": b.label[:80], "data": {BUTTON_KEY: b.command}}
        for b in buttons[:MAX_ACTIONS]
    ]
    content = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": VERSION,
        "body": [{"type": "TextBlock", "text": text, "wrap": True}],
        "actions": actions,
    }
    return {"contentType": ADAPTIVE, "content": content}
