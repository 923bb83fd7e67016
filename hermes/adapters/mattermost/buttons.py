"""A send's buttons as a Mattermost message attachment: one `button` action per Button,
each posting back to hermes's listener (`actions_url`) with a context Mattermost keeps
from clients: the command, where it was shown and our token over both
(inbound.action_token). A button whose command is empty or too long is left off, and
said why."""

from __future__ import annotations

from typing import Any

from hermes.adapters.contract import Button
from hermes.adapters.mattermost.inbound import MAX_COMMAND, action_token

MAX_LABEL = 80


def attachment(
    buttons: tuple[Button, ...], url: str, key: bytes, channel: str, root: str, kind: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The `props.attachments` carrying `buttons` ([] when none fits) and a line for each
    button left off."""
    actions: list[dict[str, Any]] = []
    left_off: list[str] = []
    for button in buttons:
        if not button.command or len(button.command) > MAX_COMMAND or not button.label:
            left_off.append(f"button {button.label!r} left off: an empty or too long command")
            continue
        token = action_token(key, button.command, channel, root, kind)
        context = {"command": button.command, "root": root, "kind": kind, "token": token}
        actions.append(
            {
                "id": f"hermes{len(actions)}",  # ids are letters and digits only
                "type": "button",
                "name": button.label[:MAX_LABEL],
                "integration": {"url": url, "context": context},
            }
        )
    return ([{"text": "", "actions": actions}] if actions else []), left_off
