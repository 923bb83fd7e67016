"""A send's buttons as Block Kit: the text in `section` blocks (mrkdwn, 3,000 characters
each at most, so a long chunk takes several), then one `actions` block with a `button`
per Button whose `value` is the button's command, so a press comes back (a
`block_actions` interaction) as that command. The message's `text` stays beside the
blocks: Slack shows it in notifications.

Slack refuses the whole message for one bad block (`invalid_blocks`), so a button that
would not fit is left off, and said why, instead: more than 25 in the block, a command
empty or over 2,000 characters, an empty label. A label over 75 characters is cut (it
is only shown).
"""

from __future__ import annotations

from typing import Any

from hermes.adapters.contract import Button

MAX_SECTION = 3000  # characters of a section's text
MAX_BUTTONS = 25  # elements of one actions block
MAX_VALUE = 2000
MAX_LABEL = 75
ENTITIES = ("&amp;", "&lt;", "&gt;")  # what escaping makes: never cut through one


def with_buttons(text: str, buttons: tuple[Button, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """The `blocks` of a message of `text` (escaped mrkdwn) carrying `buttons` ([] when
    none fits: the text is sent alone), and a line for each button left off."""
    elements: list[dict[str, Any]] = []
    left_off: list[str] = []
    for button in buttons:
        problem = _misfit(button, len(elements))
        if problem is not None:
            left_off.append(
                f"button {button.label!r} ({button.command[:80]!r}) left off: {problem}"
            )
            continue
        label = button.label
        if len(label) > MAX_LABEL:
            label = label[: MAX_LABEL - 1] + "…"
        elements.append(
            {
                "type": "button",
                "action_id": f"hermes_{len(elements)}",
                "text": {"type": "plain_text", "text": label},
                "value": button.command,
            }
        )
    if not elements:
        return [], left_off
    sections = [
        {"type": "section", "text": {"type": "mrkdwn", "text": piece}}
        for piece in sections_of(text)
    ]
    return [*sections, {"type": "actions", "elements": elements}], left_off


def _misfit(button: Button, taken: int) -> str | None:
    """Why `button` cannot join an actions block that holds `taken` buttons, or None."""
    if taken >= MAX_BUTTONS:
        return f"an actions block holds {MAX_BUTTONS} buttons"
    if not button.command or len(button.command) > MAX_VALUE:
        return f"its command must be 1 to {MAX_VALUE} characters"
    if not button.label:
        return "its label is empty"
    return None


def sections_of(text: str, size: int = MAX_SECTION) -> list[str]:
    """`text` in pieces of at most `size` characters, cut at the last line break of a
    piece's second half, else at `size` (never inside an escaped `&`, `<`, `>`);
    blank pieces are left out."""
    pieces: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind("\n", size // 2, size + 1)
        if cut > 0:
            piece, rest = rest[:cut], rest[cut + 1 :]
        else:
            cut = size
            start = rest.rfind("&", size - 4, size)  # an entity the cut may go through
            if start >= 0 and rest.startswith(ENTITIES, start):
                cut = start
            piece, rest = rest[:cut], rest[cut:]
        if piece.strip():
            pieces.append(piece)
    if rest.strip():
        pieces.append(rest)
    return pieces
