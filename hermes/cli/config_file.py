"""config.yaml as `hermes setup` writes it: only the keys that differ from the defaults,
each under a comment saying what it is (the field's docstring, the line of
docs/configuration.md), and the diff against the file that is there.

Pure: data in, text out. The data is checked by the loader itself before a line is
written, so the wizard never writes a file serve would refuse.
"""

from __future__ import annotations

import difflib
import textwrap
import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs

from hermes.adapters.registry import SECTIONS
from hermes.cli.config_reference import default_text, field_help
from hermes.config import parse_config
from hermes.gateway.settings import Config

WIDTH = 88  # a comment line's length at most
_converter = cattrs.Converter()


def minimal(data: Mapping[str, Any], source: str = "config.yaml") -> dict[str, Any]:
    """`data` (config.yaml's mapping) checked by the loader (ConfigError naming the key),
    less every key whose value is its default: what the file must say, and no more."""
    return minimal_of(parse_config(dict(data), source, Config, SECTIONS))


def minimal_of(config: Config) -> dict[str, Any]:
    """The keys of `config` that differ from the defaults, as plain data."""
    kept = _differences(config, Config())
    platforms = {name: _differences(s, type(s)()) for name, s in config.platforms.items()}
    kept.pop("platforms", None)
    if platforms:  # a platform's section is kept even when empty: having one enables it
        kept["platforms"] = platforms
    return kept


def _differences(record: Any, default: Any) -> dict[str, Any]:
    """The fields of an attrs `record` that differ from `default`'s, as plain data; a
    section compared with its own default, a mapping of sections entry by entry."""
    kept = {}
    for field in attrs.fields(type(record)):
        value, base = getattr(record, field.name), getattr(default, field.name)
        if value == base:
            continue
        if attrs.has(type(value)):
            kept[field.name] = _differences(value, base)
        elif isinstance(value, Mapping):
            kept[field.name] = {k: _plain_of(v) for k, v in value.items()}
        else:
            kept[field.name] = _plain(value)
    return kept


def _plain_of(value: Any) -> Any:
    """A mapping's entry: a section less the fields at their declared defaults (its class
    may have no instance of all defaults: an MCP server needs a command or a url)."""
    if not attrs.has(type(value)):
        return _plain(value)
    kept = {}
    for field in attrs.fields(type(value)):
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        item = getattr(value, field.name)
        if item != default:
            kept[field.name] = _plain(item)
    return kept


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively: what YAML reads back."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if attrs.has(type(value)):
        return _plain(_converter.unstructure(value))
    return value


def commented_yaml(data: Mapping[str, Any]) -> str:
    """`data` as YAML block mappings, each key under its meaning as a comment."""
    lines = [
        "# hermes config.yaml, written by `hermes setup`: only what differs from the",
        "# defaults (docs/configuration.md lists every key; `hermes config show` the",
        "# effective config).",
    ]
    lines += _mapping(data, _top, 0)
    return "\n".join(lines) + "\n"


def _mapping(data: Mapping[str, Any], inside: Inside, depth: int) -> list[str]:
    indent = "  " * depth
    lines = []
    for key, value in data.items():
        cls, meaning = inside(key)
        if meaning:
            width = max(40, WIDTH - len(indent) - 2)
            lines += [f"{indent}# {line}" for line in textwrap.wrap(meaning, width)]
        if isinstance(value, Mapping) and value:
            lines.append(f"{indent}{key}:")
            lines += _mapping(value, _inside(cls), depth + 1)
        else:
            lines.append(f"{indent}{key}: {default_text(value) if value != {} else '{}'}")
    return lines


Inside = Callable[[str], tuple[Any, str | None]]
"""What a key of a mapping holds (a settings class, or a mapping of them) and its
meaning."""


def _inside(kind: Any) -> Inside:
    """How the keys of a mapping of `kind` are read: an attrs section by its fields, the
    `platforms` mapping by each platform's own section, a mapping of sections by the
    sections' class; anything else has no meanings to show."""
    if kind is _PLATFORMS:
        return lambda name: (SECTIONS.get(name), None)
    if isinstance(kind, type) and attrs.has(kind):
        meanings = field_help(kind)
        hints = typing.get_type_hints(kind)
        return lambda key: (hints.get(key), meanings.get(key))
    args = typing.get_args(kind)
    if typing.get_origin(kind) is dict and len(args) == 2:
        return lambda _name: (args[1], None)
    return lambda _key: (None, None)


_PLATFORMS = object()  # the `platforms` mapping's marker


def _top(key: str) -> tuple[Any, str | None]:
    cls, meaning = _inside(Config)(key)
    return (_PLATFORMS if key == "platforms" else cls), meaning


def diff(old: str, new: str, path: str) -> str:
    """A unified diff of config.yaml as it is (`old`) and as setup would write it."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        f"{path} (now)",
        f"{path} (setup)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
