"""The skills' section of config.yaml (`skills`).

The docstring under each field of this class is its line in docs/configuration.md.
"""

from __future__ import annotations

from typing import Any

import attrs

from hermes.config import BadValue, Role, at_least


def _skill_roles(_inst: Any, attr: attrs.Attribute, value: dict[str, tuple[str, ...]]) -> None:
    """Each named skill's roles (each an owner or user, as Role's type checks): not none."""
    for name, roles in value.items():
        if not roles:
            raise BadValue(f"{attr.name}.{name}: name owner, user or both")


@attrs.frozen
class SkillsConfig:
    """Skills: folders of instructions under HERMES_HOME/skills that the agent opens when a
    task needs them."""

    roles: dict[str, tuple[Role, ...]] = attrs.field(factory=dict, validator=_skill_roles)
    """Which roles may use a shared skill, by its name (`owner` alone: owners only); unset:
    every role, unless the skill's own front matter says owners only."""
    index_chars: int = attrs.field(default=3_000, validator=at_least(200))
    """How much of every system prompt the list of skills (names and descriptions) may take;
    the rest are named by `skills_list`."""
    remind_after: int = attrs.field(default=8, validator=at_least(1))
    """Tool calls in one turn after which the agent is reminded, once, that it may save what
    it learned as a skill."""
