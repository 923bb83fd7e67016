"""A send's buttons as Discord message components: one action row of buttons whose
`custom_id` is the button's command, so a press comes back (INTERACTION_CREATE) as that
command.

Discord refuses the whole message for one bad component (400 50035), so a button that
would not fit is left off, and said why, instead: more than five in the row, a
custom_id empty or over 100 characters, a label empty or over 80, a command already on
another button of the message (custom_ids are unique per message).

Styles: a command that starts with "/deny" is danger (red), otherwise the first button
is primary (blurple) and the rest secondary (grey): the approval prompt reads Approve,
Always for this session, Deny.
"""

from __future__ import annotations

from typing import Any

from hermes.adapters.contract import Button

ACTION_ROW, BUTTON = 1, 2
PRIMARY, SECONDARY, DANGER = 1, 2, 4
MAX_BUTTONS = 5  # in one action row
MAX_CUSTOM_ID = 100
MAX_LABEL = 80


def button_row(buttons: tuple[Button, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """The `components` of a message carrying `buttons` ([] for none), and a line for
    each button left off."""
    row: list[dict[str, Any]] = []
    left_off: list[str] = []
    for button in buttons:
        problem = _misfit(button, row)
        if problem is not None:
            left_off.append(f"button {button.label!r} ({button.command!r}) left off: {problem}")
            continue
        row.append(
            {
                "type": BUTTON,
                "style": _style(button, first=not row),
                "label": button.label,
                "custom_id": button.command,
            }
        )
    return ([{"type": ACTION_ROW, "components": row}] if row else []), left_off


def _misfit(button: Button, row: list[dict[str, Any]]) -> str | None:
    """Why `button` cannot join `row`, or None."""
    if len(row) >= MAX_BUTTONS:
        return f"a row holds {MAX_BUTTONS} buttons"
    if not button.command or len(button.command) > MAX_CUSTOM_ID:
        return f"its command must be 1 to {MAX_CUSTOM_ID} characters"
    if not button.label or len(button.label) > MAX_LABEL:
        return f"its label must be 1 to {MAX_LABEL} characters"
    if any(b["custom_id"] == button.command for b in row):
        return "another button has the same command"
    return None


def _style(button: Button, *, first: bool) -> int:
    if button.command.startswith("/deny"):
        return DANGER
    return PRIMARY if first else SECONDARY
