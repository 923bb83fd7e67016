"""SKILL.md, the one file every skill has: YAML front matter (the open Agent Skills
format's `name`, `description`, optional `license`, `allowed-tools`, `compatibility`,
`metadata`) and then the Markdown instructions the agent reads when the task needs them.

Only the name and the description go into every prompt, so both are checked and bounded
here; the body is read when the skill is opened."""

from __future__ import annotations

import re
from typing import Any

import attrs
import yaml

from hermes.actors.errors import Invalid

CARD = "SKILL.md"
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
NAME_CHARS = 64
DESCRIPTION_CHARS = 1_024
RESERVED = frozenset({"users"})  # skills/users/ holds users' own skills
FIELDS = frozenset({"name", "description", "license", "allowed-tools", "compatibility", "metadata"})
FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillFormatError(Invalid):
    """A SKILL.md that is not in the Agent Skills format: the message says what is wrong."""


def check_name(name: str) -> str:
    """`name` if it can name a skill (lowercase letters, digits and single hyphens; at most
    64): it is also the skill's directory, so nothing else ever reaches the filesystem."""
    if not isinstance(name, str) or len(name) > NAME_CHARS or not NAME.fullmatch(name):
        raise SkillFormatError(
            f"{name!r} cannot name a skill: use lowercase letters, digits and single hyphens"
            f" (at most {NAME_CHARS})"
        )
    if name in RESERVED:
        raise SkillFormatError(f"{name!r} is reserved; choose another name")
    return name


ROLES = ("owner", "user")


@attrs.frozen
class Card:
    """What SKILL.md's front matter says. `roles`: who may use it (metadata `roles: owner`
    keeps it to owners); empty: every role."""

    name: str
    description: str
    license: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: dict[str, str] = attrs.Factory(dict)
    roles: tuple[str, ...] = ()

    @property
    def owners_only(self) -> bool:
        return self.roles == ("owner",)


def parse_card(text: str, directory_name: str | None = None) -> tuple[Card, str]:
    """The card and the instructions of a SKILL.md's `text`; `directory_name`: the
    directory it sits in, which the name must match."""
    found = FRONT.match(text)
    if found is None:
        raise SkillFormatError(f"{CARD} must start with YAML front matter between '---' lines")
    try:
        front = yaml.safe_load(found.group(1))
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"{CARD}'s front matter is not YAML: {exc}") from None
    if not isinstance(front, dict):
        raise SkillFormatError(f"{CARD}'s front matter must be a mapping of fields")
    unknown = sorted(set(map(str, front)) - FIELDS)
    if unknown:
        raise SkillFormatError(
            f"{CARD} has unknown fields {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})"
        )
    name = check_name(front.get("name", ""))
    if directory_name is not None and name != directory_name:
        raise SkillFormatError(f"{CARD} names {name!r} but sits in {directory_name!r}")
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError(f"{CARD} needs a description: what the skill does and when")
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_CHARS:
        raise SkillFormatError(f"{CARD}'s description is over {DESCRIPTION_CHARS} characters")
    metadata = front.get("metadata")
    card = Card(
        name,
        description,
        _text(front, "license"),
        _tools(front.get("allowed-tools")),
        _metadata(metadata),
        _roles(metadata),
    )
    return card, text[found.end() :]


def render_card(card: Card, body: str) -> str:
    """SKILL.md for `card` and `body` (skill_manage writes it)."""
    front: dict[str, Any] = {"name": card.name, "description": card.description}
    if card.license:
        front["license"] = card.license
    if card.allowed_tools:
        front["allowed-tools"] = " ".join(card.allowed_tools)
    metadata = {**card.metadata, **({"roles": " ".join(card.roles)} if card.roles else {})}
    if metadata:
        front["metadata"] = metadata
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip()
    return f"---\n{head}\n---\n{body.lstrip()}"


def _text(front: dict, key: str) -> str | None:
    value = front.get(key)
    if value is not None and not isinstance(value, str):
        raise SkillFormatError(f"{CARD}'s {key} must be text")
    return value


def _tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SkillFormatError(f"{CARD}'s allowed-tools must be tool names separated by spaces")


def _roles(metadata: Any) -> tuple[str, ...]:
    """metadata `roles`, as text (`owner`, `owner user`) or a list; a role hermes does
    not know is refused, never read as "every role" (a skill meant for owners would be
    open to all)."""
    value = metadata.get("roles") if isinstance(metadata, dict) else None
    if value is None:
        return ()
    words = value.split() if isinstance(value, str) else value
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise SkillFormatError(f"{CARD}'s metadata roles must be owner, user or both")
    roles = tuple(dict.fromkeys(w.strip().lower() for w in words))
    unknown = [r for r in roles if r not in ROLES]
    if unknown or not roles:
        raise SkillFormatError(f"{CARD}'s metadata roles are owner and user, not {unknown}")
    return tuple(r for r in ROLES if r in roles)


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SkillFormatError(f"{CARD}'s metadata must be a mapping")
    return {str(k): str(v) for k, v in value.items() if k != "roles"}  # roles: Card.roles
