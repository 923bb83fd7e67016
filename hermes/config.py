"""config.yaml read strictly into typed attrs records, with a default for everything.

Each feature declares its own section of the file beside its code (a `settings`
module in its package; a platform's in its own package), with the validators here;
the gateway assembles them into the record of the whole file
(hermes.gateway.settings.Config), which `load_config` builds. A bad file (unknown
key, wrong type, bad value, broken YAML, not UTF-8) raises ConfigError naming the file
and the key path; nothing half-loaded is ever returned. Secrets never live in
config.yaml: it names environment variables, whose values come from the process
environment or HERMES_HOME/.env.
"""

from __future__ import annotations

import difflib
import functools
import math
import os
import re
import typing
import zoneinfo
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar

import attrs
import cattrs
import dotenv
import yaml

T = TypeVar("T")


class ConfigError(Exception):
    """config.yaml (or .env) cannot be used; the message names the file and key."""


class BadValue(ValueError):
    """Raised by validators; the key path is added by the loader."""


def positive(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise BadValue(f"{attr.name}: must be greater than 0, got {value!r}")


def at_least(minimum: int):
    def check(_inst: Any, attr: attrs.Attribute, value: int) -> None:
        if value < minimum:
            raise BadValue(f"{attr.name}: must be at least {minimum}, got {value!r}")

    return check


VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable's name, as a setting that names one (`*_env`, keys) must be."""


def not_blank(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    """A validator for text input that may be absent but never empty."""
    if value is not None and not value.strip():
        raise BadValue(f"{attr.name}: must not be empty")


def port_number(_inst: Any, attr: attrs.Attribute, value: int) -> None:
    if not 0 <= value <= 65535:
        raise BadValue(f"{attr.name}: must be a port number 0..65535, got {value!r}")


def known_timezone(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise BadValue(f"{attr.name}: unknown timezone {value!r}") from None


def seconds(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if not 0 <= value <= 60:
        raise BadValue(f"{attr.name}: must be between 0 and 60 seconds, got {value!r}")


def optional_seconds(inst: Any, attr: attrs.Attribute, value: float | None) -> None:
    if value is not None:
        seconds(inst, attr, value)


def share(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if not 0.1 <= value <= 0.95:
        raise BadValue(f"{attr.name}: must be between 0.1 and 0.95, got {value!r}")


def optional_at_least(minimum: int):
    check = at_least(minimum)

    def optional(inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is not None:
            check(inst, attr, value)

    return optional


def absolute_paths(_inst: Any, attr: attrs.Attribute, value: tuple[str, ...]) -> None:
    for path in value:
        if not path.startswith("/"):
            raise BadValue(f"{attr.name}: {path!r} is not an absolute path")


Role = Literal["owner", "user"]  # who may do what; see hermes.agent.permissions


def _strict(kind: type) -> Any:
    """Refuse what YAML would silently coerce: "30" for a number, "yes" for a bool.

    NaN and infinity are refused here, for every number at once: they pass any
    range check (`nan <= 0` is false) and would turn timeouts into nonsense.
    """
    name = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[kind]

    def structure(value: Any, _type: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise BadValue(f"expected {name}, got {value!r}")
        if kind in (int, float) and isinstance(value, float) and not math.isfinite(value):
            raise BadValue(f"expected a finite number, got {value!r}")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise BadValue(f"expected {name}, got {value!r}")
        return value

    return structure


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind in (bool, int, float, str):
        converter.register_structure_hook(kind, _strict(kind))
    return converter


_converter = _make_converter()


def _describe(exc: BaseException, _type: Any, renamed: Mapping[str, str]) -> str:
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        extra = sorted(map(str, exc.extra_fields))  # YAML keys may be 1, null, ...
        known = [f.name for f in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        moved = [f"{key} is now {renamed[key]}" for key in extra if key in renamed]
        meant = [m for key in extra for m in difflib.get_close_matches(key, known, 1, 0.7)]
        hint = f" (did you mean {', '.join(meant)}?)" if meant else ""
        hint = f" ({'; '.join(moved)})" if moved else hint
        return f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}{hint}"
    if isinstance(exc, BadValue):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    if "not in literal" in str(exc):
        return f"must be one of {', '.join(map(repr, _type.__args__))}"
    if isinstance(exc, AttributeError | TypeError):
        return f"expected a mapping of {getattr(_type, '__name__', _type)} settings"
    return str(exc)


def _errors(exc: cattrs.BaseValidationError, renamed: Mapping[str, str]) -> list[str]:
    lines = []
    describe = functools.partial(_describe, renamed=renamed)
    for line in cattrs.transform_error(exc, path="", format_exception=describe):
        message, _, where = line.rpartition(" @ ")
        where = where.lstrip(".")
        # A validator names its own field: "key: problem" found at the parent path.
        if ": " in message and not message.startswith("unknown key"):
            field, _, problem = message.partition(": ")
            if field.isidentifier():
                where = f"{where}.{field}" if where else field
                message = problem
        if message.startswith("unknown key"):
            keys, paren, hint = message.partition(" (")
            place = f"in {where}" if where else "at the top level"
            lines.append(f"{keys} {place}{paren}{hint}")
        else:
            lines.append(f"{where}: {message}" if where else message)
    return lines


class InputError(ValueError):
    """Input that does not fit its record; the message names each bad key."""


def structure(data: Any, kind: type[T], renamed: Mapping[str, str] | None = None) -> T:
    """`data` (parsed YAML or JSON) as a `kind` attrs record, strictly: no coercion
    ("30" is not a number, "yes" not a flag), no NaN or infinity, no unknown keys.
    The one way hermes checks structured input (config.yaml, the endpoint's params).
    `renamed`: keys an earlier release read, and what took their place (named in the
    error)."""
    try:
        return _converter.structure(data, kind)
    except cattrs.BaseValidationError as exc:
        raise InputError("; ".join(_errors(exc, renamed or {}))) from None


def _within(where: str, problem: str) -> str:
    """A problem found in a platform's section, named from the top of config.yaml."""
    if " at the top level" in problem:
        return problem.replace(" at the top level", f" in {where}", 1)
    if problem.startswith("unknown key"):
        return problem.replace(" in ", f" in {where}.", 1)
    return f"{where}.{problem}"


Sections = Mapping[str, type]
"""Each platform's config section by name (the adapters' registry has them); a platform
not in it is read as the section every platform has (the type of the record's
`platforms` values)."""


class File(Protocol):
    """The record of a whole config.yaml, which load_config builds (hermes.gateway.settings
    has it): its sections, and `platforms`, a section per platform by name."""

    renamed: ClassVar[Mapping[str, str]]
    """Keys an earlier release read, and what took their place: named in the error."""

    @property
    def platforms(self) -> Mapping[str, Any]: ...

    def unknown_platforms(self, names: Collection[str]) -> str | None:
        """A problem with a platform another section names, given those under
        `platforms` (`names`); None when there is none."""
        ...


F = TypeVar("F", bound=File)


def _platform_section(kind: type[File]) -> type:
    """The section every platform has: what `kind` maps each name of `platforms` to."""
    return typing.get_args(typing.get_type_hints(kind)["platforms"])[1]


def parse_config(data: Any, source: str, kind: type[F], sections: Sections | None = None) -> F:
    """Structure already-parsed YAML into a `kind` record, or raise ConfigError."""
    if data is None:
        return kind()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of settings")
    platforms = data.get("platforms")
    try:
        config = structure({k: v for k, v in data.items() if k != "platforms"}, kind, kind.renamed)
    except InputError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    problem = config.unknown_platforms(platforms or {})
    if problem:
        raise ConfigError(f"{source}: {problem}")
    if platforms is None:
        return config
    if not isinstance(platforms, Mapping):
        raise ConfigError(f"{source}: platforms: expected a mapping of platforms")
    read = {}
    shared = _platform_section(kind)
    for name, section in platforms.items():
        settings = (sections or {}).get(str(name), shared)
        try:
            read[str(name)] = structure({} if section is None else section, settings, kind.renamed)
        except InputError as exc:
            where = f"platforms[{str(name)!r}]"
            problems = [_within(where, p) for p in str(exc).split("; ")]
            raise ConfigError(f"{source}: {'; '.join(problems)}") from None
    return attrs.evolve(config, platforms=read)


_BOOL_TAG = "tag:yaml.org,2002:bool"


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core booleans: only true/false (True, TRUE, ...).

    YAML 1.1's yes/no/on/off/y/n stay text, so a flag set to `yes` is refused
    by the strict hook with its key named instead of silently becoming true.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _read_text(path: Path) -> str | None:
    """The file as text; None when it does not exist."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {_not_utf8(exc)}") from None


def _not_utf8(exc: UnicodeDecodeError) -> str:
    line = exc.object.count(b"\n", 0, exc.start) + 1
    return f"not UTF-8 text (line {line}: byte 0x{exc.object[exc.start]:02x})"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: where it is and what is wrong."""
    if isinstance(exc, yaml.reader.ReaderError):  # a control character: a binary file
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"not a YAML text file: character U+{code:04X} at offset {exc.position}"
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    problem = getattr(exc, "problem", None) or "cannot parse"
    return f"not valid YAML{where}: {problem}"


def load_config(path: Path, kind: type[F], sections: Sections | None = None) -> F:
    """Read config.yaml into a `kind` record (hermes.gateway.settings.Config); a missing
    file is its default. `sections`: each platform's own settings class
    (hermes.adapters.registry.SECTIONS)."""
    text = _read_text(path)
    if text is None:
        return kind()
    try:
        data = yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    return parse_config(data, str(path), kind, sections)


def dump_config(config: File) -> dict[str, Any]:
    """The effective config as plain data (for `hermes config show`)."""
    data = _converter.unstructure(config)
    data["platforms"] = {  # each as its own section, with its own settings
        name: _converter.unstructure(p, unstructure_as=type(p))
        for name, p in config.platforms.items()
    }
    return data


@attrs.frozen
class Secrets:
    """Secret values by variable name: the environment first, then .env.

    Its repr never shows a value; neither does anything that logs it.
    """

    _values: Mapping[str, str] = attrs.field(repr=False)
    _dotenv_names: frozenset[str] = attrs.field(repr=False)
    _file_values: tuple[str, ...] = attrs.field(default=(), repr=False)  # all of .env's

    @classmethod
    def load(cls, env_path: Path, environ: Mapping[str, str] | None = None) -> Secrets:
        environ = os.environ if environ is None else environ
        try:
            from_file = {k: v for k, v in dotenv.dotenv_values(env_path).items() if v is not None}
        except OSError as exc:
            raise ConfigError(f"{env_path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{env_path}: {_not_utf8(exc)}") from None
        merged = {**from_file, **environ}
        names = frozenset(k for k in from_file if k not in environ)
        return cls(merged, names, tuple(v for v in from_file.values() if v))

    def get(self, name: str | None) -> str | None:
        """The variable's value; None when it is unset, or no variable is named (a
        setting left out)."""
        return self._values.get(name) if name else None

    def hidden(self, names: list[str]) -> list[str]:
        """What must never be shown: the values of `names` (the secrets config names) and
        every value in .env (the file holds secrets only), overridden ones included."""
        return [v for v in (*(self.get(n) for n in names), *self._file_values) if v]

    def source(self, name: str) -> str:
        """Where a secret comes from: 'environment', '.env' or 'missing'."""
        if name not in self._values:
            return "missing"
        return ".env" if name in self._dotenv_names else "environment"
