"""Every platform hermes speaks, by name: adding one is its package and one name here.

A platform's package is imported the first time its record is read, not before: a
`hermes` command that touches no platform (cron list on an empty home) loads none, and a
config that names one loads only that one's settings.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from hermes.adapters.platform import Limit, Platform
from hermes.adapters.settings import PlatformConfig

V = TypeVar("V")
NAMES = (
    "local",
    "telegram",
    "slack",
    "discord",
    "whatsapp",
    "email",
    "matrix",
    "signal",
    "mattermost",
    "webhook",
    "api",
    "teams",
    "homeassistant",
    "imessage",
    "sms",
)
DEFAULT_LIMIT = Limit(4000, "chars")  # a platform hermes does not know (a mirror of one)


class _ByName(Mapping[str, V]):
    """What `read(name)` gives for each name of NAMES, computed when it is first asked for
    (reading a record imports its platform's package)."""

    def __init__(self, read: Callable[[str], V]) -> None:
        self._read = read

    def __getitem__(self, name: str) -> V:
        if name not in NAMES:
            raise KeyError(name)
        return self._read(name)

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


def _record(name: str) -> Platform:
    """`hermes.adapters.<name>.platform`'s `<NAME>`."""
    return getattr(importlib.import_module(f"hermes.adapters.{name}.platform"), name.upper())


PLATFORMS: Mapping[str, Platform] = _ByName(_record)
SECTIONS: Mapping[str, type[PlatformConfig]] = _ByName(lambda name: PLATFORMS[name].settings)


def chat_platforms() -> dict[str, Platform]:
    """The platforms with an adapter to configure (all but the local endpoint)."""
    return {name: p for name, p in PLATFORMS.items() if p.adapter is not None}
