"""Text as Mattermost shows it: its Markdown is the agent's, so nothing is escaped but
the mentions that would notify everyone in a channel (`@all`, `@channel`, `@here`),
which a zero-width space keeps as text."""

from __future__ import annotations

import re

_LOUD = re.compile(r"@(all|channel|here)\b", re.IGNORECASE)


def escape(text: str) -> str:
    return _LOUD.sub("@\u200b\\1", text)
