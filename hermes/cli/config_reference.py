"""`hermes config reference`: every key of config.yaml as Markdown, from the config classes.

The classes are the one source. A key's meaning is the docstring written under its
field (`timeout: float = 30.0` then `\"\"\"Seconds ...\"\"\"`), read from the class's
source; its type and default come from attrs. docs/configuration.md is this
command's output, and a test keeps the two equal, so the manual cannot drift from
the code. A field without a docstring is an error naming it.
"""

from __future__ import annotations

import ast
import inspect
import types
import typing
from typing import Any, Literal

import attrs
import yaml

from hermes.actors.errors import Invalid
from hermes.adapters.registry import chat_platforms
from hermes.adapters.settings import PlatformConfig
from hermes.gateway.settings import Config

REGENERATE = "hermes config reference > docs/configuration.md"
EACH_OF_A_PLATFORM = "<key>"  # a platform's own mapping of sections (`<name>` is the platform)

INTRO = f"""\
# Configuration reference

<!-- Generated from the config classes by `hermes config reference`; do not edit.
     Change the docstrings under the fields in hermes/*/settings.py (the sections
     of features, which hermes/gateway/settings.py assembles) and
     hermes/adapters/<name>/config.py, then run: {REGENERATE} -->

hermes reads `config.yaml` from HERMES_HOME (`~/.hermes` unless the `HERMES_HOME`
variable says otherwise; `hermes config path` prints where). The file is optional:
every key has the default shown here, and a file holds only the keys you change.
`hermes config show` prints the effective configuration.

The file is read strictly. An unknown key, a value of the wrong type (`"30"` where a
number belongs, `yes` for `true`) or a value out of range stops hermes with one line
naming the file and the key, and exit status 2. Secrets never go in config.yaml: keys
ending in `_env` name an environment variable, whose value comes from the process
environment or, failing that, from `HERMES_HOME/.env`.

Types: *number* takes `30` or `0.5`; *whole number* only `30`; *text* is a YAML string;
*list of text* is `[a, b]` or a block list; *null* (or leaving the key out) means unset.
"""


class MissingHelp(Invalid):
    """A config field has no docstring under it, so the reference cannot say what it means."""


@attrs.frozen
class Key:
    """One row of the reference: a key's dotted path, its type, default and meaning.
    `section`: the key holds a section of keys of its own (listed under its path), or
    with `each`, a mapping of such sections by name (listed under `path.<name>`)."""

    path: str
    type: str
    default: str
    meaning: str
    section: type | None = None
    each: bool = False


def field_help(cls: type) -> dict[str, str]:
    """The docstring under each field of `cls` (and of the classes it inherits)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not attrs.has(klass):
            continue
        body = ast.parse(inspect.getsource(klass)).body[0]
        statements = body.body if isinstance(body, ast.ClassDef) else []
        for field, after in zip(statements, statements[1:], strict=False):
            doc = _docstring(after)
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and doc:
                found[field.target.id] = " ".join(doc.split())
    return found


def _docstring(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return node.value.value if isinstance(node.value.value, str) else None
    return None


def _is_section(kind: Any) -> bool:
    return isinstance(kind, type) and attrs.has(kind)


def type_name(kind: Any) -> str:
    """A field's type as a reader of config.yaml meets it."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) if a is not type(None) else "null" for a in args]
        return " or ".join(sorted(names, key=lambda n: n == "null"))  # null last
    if origin is Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin is tuple:
        inner = args[0]
        return f"list of {'entries' if _is_section(inner) else type_name(inner)}"
    if origin is dict:
        return "mapping of sections" if _is_section(args[1]) else f"mapping of {type_name(args[1])}"
    if _is_section(kind):
        return "section"
    return {bool: "true or false", int: "whole number", float: "number", str: "text"}[kind]


def default_text(value: Any) -> str:
    """A default as it would be written in config.yaml."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, tuple):
        value = list(value)
    if attrs.has(type(value)):
        return ""  # a section: its keys have the defaults
    text = yaml.safe_dump(value, default_flow_style=True, width=1000)
    return text.removesuffix("\n...\n").strip()  # a plain scalar's document end


def keys_of(cls: type, prefix: str = "") -> list[Key]:
    """The keys of one section, in the order the class declares them."""
    hints = typing.get_type_hints(cls)
    help_ = field_help(cls)
    rows = []
    for field in attrs.fields(cls):
        path = f"{prefix}{field.name}"
        if field.name not in help_:
            raise MissingHelp(f"{cls.__qualname__}.{field.name} ({path}) has no docstring")
        kind = hints[field.name]
        default = field.default
        value = default.factory() if isinstance(default, attrs.Factory) else default
        mapped = typing.get_args(kind)[1] if typing.get_origin(kind) is dict else None
        section = kind if _is_section(kind) else mapped if _is_section(mapped) else None
        shown = "" if section is not None else default_text(value)  # a section's: below
        rows.append(
            Key(path, type_name(kind), shown, help_[field.name], section, section is mapped)
        )
    return rows


def _cell(text: str) -> str:
    """Text for a table cell: `|` escaped, and `<` and `>` outside code spans too (a
    `<session>` would be read as an HTML tag)."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _table(rows: list[Key]) -> list[str]:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for row in rows:
        default = f"`{row.default}`" if row.default else "see below"
        lines.append(f"| `{row.path}` | {row.type} | {default} | {_cell(row.meaning)} |")
    return lines


def _sections(rows: list[Key], level: int, each: str = "<name>") -> list[str]:
    """Each section among `rows`, its table, then the sections inside it; `each` stands
    for the name of one of a mapping of sections in their paths."""
    out: list[str] = []
    for row in rows:
        if row.section is None:
            continue
        path = f"{row.path}.{each}" if row.each else row.path
        inner = keys_of(row.section, path + ".")
        out += ["", f"{'#' * level} `{path}`", "", _cell(row.meaning), "", *_table(inner)]
        out += _sections(inner, level + 1, each)
    return out


def _platforms() -> list[str]:
    """`platforms:`: the keys every platform has, then each platform's own."""
    shared = keys_of(PlatformConfig, "platforms.<name>.")
    names = sorted(chat_platforms())
    out = [
        "",
        "## `platforms`",
        "",
        "One section per chat platform, named by the platform: "
        f"{', '.join(f'[{n}](platforms/{n}.md)' for n in names)} (each link is its "
        "set-up). A platform with a section is enabled (unless `enabled: false`); its "
        "token variables must then be set, or serve stops at start naming the variable. "
        "The local endpoint has no section here: it is `gateway.local` "
        "([local](platforms/local.md)).",
        "",
        "Every platform has these keys:",
        "",
        *_table(shared),
        *_sections(shared, 3),
    ]
    # A platform's own keys, and the shared ones whose default it changes.
    shared_as = {k.path.rsplit(".", 1)[1]: k for k in shared}
    for name in names:
        settings = chat_platforms()[name].settings
        own = []
        for k in keys_of(settings, f"platforms.{name}."):
            same = shared_as.get(k.path.rsplit(".", 1)[1])
            if same is None or (same.default, same.meaning) != (k.default, k.meaning):
                own.append(k)
        out += ["", f"### `platforms.{name}`", ""]
        out += ["The keys above, and:", "", *_table(own)] if own else ["The keys above only."]
        out += _sections(own, 4, EACH_OF_A_PLATFORM)
    return out


def reference() -> str:
    """The whole reference, as docs/configuration.md holds it."""
    top = keys_of(Config)
    sections = [row for row in top if row.path != "platforms"]  # below, platform by platform
    lines = [INTRO.rstrip("\n"), "", "## Top level", "", *_table(top), *_sections(sections, 2)]
    lines += _platforms()
    return "\n".join(lines) + "\n"
