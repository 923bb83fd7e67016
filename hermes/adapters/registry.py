"""Every platform hermes speaks, by name: adding one is its package and one name here.

A platform's package is imported the first time its record is read, not before: a
`hermes` command that touches no platform (cron list on an empty home) loads none, and a
config that names one loads only that one's settings.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from hermes.adapters.platform import Limit, Platform
from hermes.config import PlatformConfig

NAMES = ("local", "telegram", "slack", "discord", "whatsapp", "email", "matrix", "signal")
DEFAULT_LIMIT = Limit(4000, "chars")  # a platform hermes does not know (a mirror of one)


class _Platforms(Mapping[str, Platform]):
    """Each record is `hermes.adapters.<name>.platform`'s `<NAME>`, imported on first read."""

    def __getitem__(self, name: str) -> Platform:
        if name not in NAMES:
            raise KeyError(name)
        module = importlib.import_module(f"hermes.adapters.{name}.platform")
        return getattr(module, name.upper())

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


class _Sections(Mapping[str, type[PlatformConfig]]):
    """Each platform's section of config.yaml, read from its record when asked for."""

    def __getitem__(self, name: str) -> type[PlatformConfig]:
        return PLATFORMS[name].settings

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


PLATFORMS: Mapping[str, Platform] = _Platforms()
SECTIONS: Mapping[str, type[PlatformConfig]] = _Sections()


def chat_platforms() -> dict[str, Platform]:
    """The platforms with an adapter to configure (all but the local endpoint)."""
    return {name: p for name, p in PLATFORMS.items() if p.adapter is not None}
