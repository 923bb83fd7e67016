"""What the serve tree tells the router besides events (those come by admission)."""

from __future__ import annotations

import attrs


@attrs.frozen
class Mirrored:
    """The outbox wrote a brief into these sessions: a live one reads its transcript
    again before its next turn, so a reply to the brief sees it."""

    session_ids: tuple[str, ...]


@attrs.frozen
class PairingChanged:
    """An operator approved someone: tell them they are in, now."""
