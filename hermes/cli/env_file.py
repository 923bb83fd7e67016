"""HERMES_HOME/.env as `hermes setup` updates it: the variables it sets replaced or added,
every other line kept as it was, the file written 0600 (never briefly wider)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from hermes.actors.errors import Invalid
from hermes.config import VARIABLE_NAME
from hermes.home import write_secret_file


class BadSecret(Invalid):
    """A variable name or value .env cannot hold; the message names the variable only."""


def quoted(value: str) -> str:
    """`value` as .env reads it back exactly: single quotes, `\\` and `'` escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def with_values(text: str, values: Mapping[str, str]) -> str:
    """.env's `text` with each of `values` set: its line replaced where the variable is
    (`NAME=`, `export NAME=`), else added at the end; every other line as it was."""
    for name, value in values.items():
        if not VARIABLE_NAME.fullmatch(name):
            raise BadSecret(f"{name!r} is not a variable name (letters, digits and _)")
        if "\n" in value or "\r" in value or "\0" in value:
            raise BadSecret(f"the value of {name} has a line break or NUL: .env cannot hold it")
    lines = text.splitlines()
    left = dict(values)
    for i, line in enumerate(lines):
        found = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
        if found and found[1] in left:
            lines[i] = f"{found[1]}={quoted(left.pop(found[1]))}"
    lines += [f"{name}={quoted(value)}" for name, value in left.items()]
    return "\n".join(lines) + "\n" if lines else ""


def set_values(path: Path, values: Mapping[str, str]) -> None:
    """Set `values` in the .env at `path` (created if need be), mode 0600."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    write_secret_file(path, with_values(text, values))
