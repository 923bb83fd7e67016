"""The system prompt: who the agent is, what it remembers, where it is talking."""

from __future__ import annotations

import functools
from datetime import datetime
from zoneinfo import ZoneInfo

IDENTITY = (
    "You are Hermes, a personal assistant running on your user's own server. You can run "
    "terminal commands, keep notes in memory, schedule jobs and search past conversations. "
    "Be direct and brief; say what you did."
)


def system_prompt(memory_block: str, session_id: str, source: str, tz: ZoneInfo, now: float) -> str:
    when = _minute(int(now // 60), tz)
    parts = [IDENTITY]
    if memory_block:
        parts.append(memory_block)
    parts.append(f"## This conversation\nsession {session_id} on {source}; it is {when}.")
    return "\n\n".join(parts)


@functools.lru_cache(maxsize=16)
def _minute(minute: int, tz: ZoneInfo) -> str:
    """The prompt names the time to the minute: formatted once per minute, not per turn."""
    return datetime.fromtimestamp(minute * 60, tz).strftime("%A %Y-%m-%d %H:%M %Z")
