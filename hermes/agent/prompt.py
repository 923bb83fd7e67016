"""The system prompt, assembled from named parts, each capped where it is made: the
persona (SOUL.md or the built-in identity), memory, the skills index (names and
descriptions only; a skill's body is opened by skill_view when a task needs it), the
project context (AGENTS.md), the session's todo list, and where the conversation is."""

from __future__ import annotations

import functools
from datetime import datetime
from zoneinfo import ZoneInfo

import attrs

from hermes.agent.skills.library import Skill

IDENTITY = (
    "You are Hermes, a personal assistant running on your user's own server. You can run "
    "terminal commands, keep notes in memory, schedule jobs and search past conversations. "
    "Be direct and brief; say what you did."
)
SKILL_REMINDER = (
    "## A reminder\nThis task took many tool calls. If you worked out something you or the"
    " user will need again, you may save it as a skill with skill_manage (create, or patch"
    " one you used); only if it is worth keeping."
)


@attrs.frozen
class PromptParts:
    """What one prompt holds besides the conversation; each part already within its cap."""

    persona: str = IDENTITY
    memory: str = ""
    skills: str = ""
    project: str = ""
    todo: str = ""  # the session's todo list, where it has one


def system_prompt(
    parts: PromptParts, session_id: str, source: str, tz: ZoneInfo, now: float
) -> str:
    when = _minute(int(now // 60), tz)
    named = [parts.persona, parts.memory, parts.skills, parts.project, parts.todo]
    named.append(f"## This conversation\nsession {session_id} on {source}; it is {when}.")
    return "\n\n".join(p for p in named if p)


def skills_index(skills: list[Skill], cap: int) -> str:
    """The skills a caller has, by name and description, within `cap` characters; the rest
    counted (skills_list names them all)."""
    if not skills:
        return ""
    head = "## Skills\nBefore a task one of these covers, open it with skill_view(name):"
    lines, used = [], len(head)
    for i, skill in enumerate(skills):
        line = f"- {skill.name}: {skill.card.description}"
        if used + len(line) + 1 > cap:
            lines.append(f"- and {len(skills) - i} more (skills_list names them)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join([head, *lines])


@functools.lru_cache(maxsize=16)
def _minute(minute: int, tz: ZoneInfo) -> str:
    """The prompt names the time to the minute: formatted once per minute, not per turn."""
    return datetime.fromtimestamp(minute * 60, tz).strftime("%A %Y-%m-%d %H:%M %Z")
