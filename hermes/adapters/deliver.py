"""Where the answers of a way in go (an inbound webhook's route, a subscription to a
home's events): the `deliver` setting, written `platform:chat[:thread]`, `home:platform`
(that platform's home channel, resolved at admission) or `none`, and its check; and the
names of a way in's routes or subscriptions, each the chat of its sessions."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from hermes.adapters.contract import HOME, NOWHERE
from hermes.adapters.registry import NAMES, PLATFORMS
from hermes.config import BadValue

PLATFORM = re.compile(r"[a-z][a-z0-9_]*")
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # a route's or a subscription's: a session's chat


def names_of(kind: str, why: str = "") -> Callable[[Any, attrs.Attribute, dict], None]:
    """A validator of a section's names of `kind` ("route"), `why` said after the rule."""

    def check(_inst: Any, attr: attrs.Attribute, value: dict) -> None:
        for name in value:
            if not isinstance(name, str) or not NAME.fullmatch(name):
                raise BadValue(
                    f"{attr.name}: {name!r} is not a {kind} name (lower-case letters, digits,"
                    f" _ and -, at most 64{why})"
                )

    return check


def deliver_target(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    """A validator: `none`, `home:PLATFORM` or `PLATFORM:CHAT[:THREAD]`, of a chat platform."""
    if value is None or value == NOWHERE:
        return
    if value.startswith(HOME):
        platform, chat = value[len(HOME) :], "-"
    else:
        platform, _, chat = value.partition(":")
    if not PLATFORM.fullmatch(platform) or not chat.strip() or chat != chat.strip():
        raise BadValue(
            f"{attr.name}: {value!r} is not a target: write PLATFORM:CHAT (telegram:123),"
            " home:PLATFORM (its home channel) or none"
        )
    chats = [n for n in NAMES if takes_messages(n)]
    if platform not in chats:
        raise BadValue(f"{attr.name}: {platform!r} is not a chat platform ({', '.join(chats)})")


def takes_messages(name: str) -> bool:
    """Whether a message can be sent to a chat of platform `name`: not to a way in, nor to
    a platform answered within its client's request (the local endpoint, the API)."""
    return not PLATFORMS[name].way_in and not PLATFORMS[name].streams


def platform_of(deliver: str | None) -> str | None:
    """The platform a `deliver` sends to (None: nowhere)."""
    if deliver is None or deliver == NOWHERE:
        return None
    return deliver.removeprefix(HOME).partition(":")[0]
