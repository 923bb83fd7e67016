"""A send's buttons as a Telegram inline keyboard: one row of buttons whose
`callback_data` is the button's command, so a press comes back (a `callback_query`)
as that command.

Telegram refuses the whole message for one bad button (400 BUTTON_DATA_INVALID), so a
button that would not fit is left off, and said why, instead: callback_data empty or
over 64 bytes (UTF-8), an empty label, more than eight buttons in the row.
"""

from __future__ import annotations

from typing import Any

from hermes.adapters.contract import Button

MAX_CALLBACK_DATA = 64  # bytes
MAX_BUTTONS = 8  # in one row


def inline_keyboard(buttons: tuple[Button, ...]) -> tuple[dict[str, Any] | None, list[str]]:
    """The `reply_markup` of a message carrying `buttons` (None for none), and a line
    for each button left off."""
    row: list[dict[str, str]] = []
    left_off: list[str] = []
    for button in buttons:
        problem = _misfit(button, len(row))
        if problem is not None:
            left_off.append(f"button {button.label!r} ({button.command!r}) left off: {problem}")
            continue
        row.append({"text": button.label, "callback_data": button.command})
    return ({"inline_keyboard": [row]} if row else None), left_off


def _misfit(button: Button, placed: int) -> str | None:
    """Why `button` cannot join a row of `placed` buttons, or None."""
    if placed >= MAX_BUTTONS:
        return f"a row holds {MAX_BUTTONS} buttons"
    if not 1 <= len(button.command.encode()) <= MAX_CALLBACK_DATA:
        return f"its command must be 1 to {MAX_CALLBACK_DATA} bytes"
    if not button.label.strip():
        return "its label is empty"
    return None
