"""config.yaml as typed attrs classes, with a default for everything.

A bad file (unknown key, wrong type, bad value, broken YAML, not UTF-8) raises ConfigError
naming the file and the key path; nothing half-loaded is ever returned.
Secrets never live in config.yaml: it names environment variables, whose
values come from the process environment or HERMES_HOME/.env.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import cattrs
import dotenv
import yaml

T = TypeVar("T")


class ConfigError(Exception):
    """config.yaml (or .env) cannot be used; the message names the file and key."""


class _BadValue(ValueError):
    """Raised by validators; the key path is added by the loader."""


def positive(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise _BadValue(f"{attr.name}: must be greater than 0, got {value!r}")


def _at_least(minimum: int):
    def check(_inst: Any, attr: attrs.Attribute, value: int) -> None:
        if value < minimum:
            raise _BadValue(f"{attr.name}: must be at least {minimum}, got {value!r}")

    return check


def not_blank(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    """A validator for text input that may be absent but never empty."""
    if value is not None and not value.strip():
        raise _BadValue(f"{attr.name}: must not be empty")


def _port(_inst: Any, attr: attrs.Attribute, value: int) -> None:
    if not 0 <= value <= 65535:
        raise _BadValue(f"{attr.name}: must be a port number 0..65535, got {value!r}")


def _timezone(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise _BadValue(f"{attr.name}: unknown timezone {value!r}") from None


def _share(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if not 0.1 <= value <= 0.95:
        raise _BadValue(f"{attr.name}: must be between 0.1 and 0.95, got {value!r}")


def _optional_at_least(minimum: int):
    check = _at_least(minimum)

    def optional(inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is not None:
            check(inst, attr, value)

    return optional


@attrs.frozen
class ModelConfig:
    """One model provider. `api_key_env` names the variable holding the key;
    `context_tokens` its context window (unset: the provider kind's default)."""

    provider: str = "offline"
    model: str = "hermes-offline"
    base_url: str | None = None
    api_key_env: str | None = None
    context_tokens: int | None = attrs.field(default=None, validator=_optional_at_least(1000))


Role = Literal["owner", "user"]  # who may do what; see hermes.agent.permissions
OWNER_TOOLS = ("*",)
USER_TOOLS = ("memory", "session_search", "send_message")


@attrs.frozen
class ToolsConfig:
    """Which tools each role may call (`*` is every tool), in one place. A tool a role
    may not call is never offered to its sessions. `pass_env`: variables a command's
    environment keeps although they hold a secret."""

    owner: tuple[str, ...] = OWNER_TOOLS
    user: tuple[str, ...] = USER_TOOLS
    pass_env: tuple[str, ...] = ()


@attrs.frozen
class AgentConfig:
    """`compact_at`: the share of a model's context window a prompt may fill before
    the conversation is compacted; `keep_turns`: recent turns compaction never touches;
    `workdir`: where terminal sessions start (unset: HERMES_HOME/workspace/<session>)."""

    max_turns: int = attrs.field(default=20, validator=_at_least(1))
    compact_at: float = attrs.field(default=0.75, validator=_share)
    keep_turns: int = attrs.field(default=4, validator=_at_least(1))
    tools: ToolsConfig = ToolsConfig()
    workdir: str | None = attrs.field(default=None, validator=not_blank)

    def workdir_path(self) -> Path | None:
        return Path(self.workdir).expanduser() if self.workdir else None


@attrs.frozen
class LocalEndpointConfig:
    host: str = "127.0.0.1"
    port: int = attrs.field(default=9119, validator=_port)


@attrs.frozen
class GatewayConfig:
    """`allowed_users`: platform user ids allowed on every platform; `owners`: user ids
    that are owners on every platform; `resume_window`: how old a turn cut by a restart
    may be and still be resumed (seconds); `rate_limit`: messages a user may send per
    minute (0: no limit)."""

    drain_timeout: float = attrs.field(default=30.0, validator=positive)
    busy_mode: Literal["interrupt", "queue"] = "interrupt"
    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False
    local: LocalEndpointConfig = LocalEndpointConfig()
    allowed_users: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    resume_window: float = attrs.field(default=600.0, validator=positive)
    rate_limit: int = attrs.field(default=20, validator=_at_least(0))


@attrs.frozen
class PlatformConfig:
    """What every chat platform under `platforms:` has. `token_env` names the variable
    holding its token; the value comes from the environment or .env. `group_policy`:
    "allowlist" (only `allowed_chats`), "open", "disabled". `home_channel` is
    `chat[:thread]`; `owner` a user id (else the first approved). A platform with
    settings of its own subclasses it in its package (its `Platform.settings`)."""

    enabled: bool = True
    token_env: str | None = None
    base_url: str | None = None
    allowed_users: tuple[str, ...] = ()
    allow_all_users: bool = False
    allowed_chats: tuple[str, ...] = ()
    group_policy: Literal["allowlist", "open", "disabled"] = "allowlist"
    require_mention: bool = True
    home_channel: str | None = None
    owner: str | None = None

    def token_names(self) -> list[str]:
        """Every variable the platform takes a secret from."""
        return [self.token_env] if self.token_env else []


@attrs.frozen
class CronConfig:
    failure_nudge_threshold: int = attrs.field(default=3, validator=_at_least(0))
    mirror_delivery: bool = False
    catch_up: bool = True
    lease_seconds: float = attrs.field(default=60.0, validator=positive)
    heartbeat_seconds: float = attrs.field(default=20.0, validator=positive)


@attrs.frozen
class RetentionConfig:
    """How long what piles up in state.db is kept; serve prunes it every `prune_every`
    seconds while it runs. `journal_days`: inbound events (duplicates are recognised
    within it); `outbox_sent_days`: sent outbox rows; `cron_runs_per_job`: the newest
    runs kept per job; `cron_deliveries_days`: cron delivery records;
    `pairing_failures_hours`: failed pairing approvals (at least the 2 hours the
    lockout looks back)."""

    journal_days: float = attrs.field(default=7.0, validator=positive)
    outbox_sent_days: float = attrs.field(default=30.0, validator=positive)
    cron_runs_per_job: int = attrs.field(default=200, validator=_at_least(1))
    cron_deliveries_days: float = attrs.field(default=30.0, validator=positive)
    pairing_failures_hours: float = attrs.field(default=24.0, validator=_at_least(2))
    prune_every: float = attrs.field(default=3600.0, validator=_at_least(60))


@attrs.frozen
class OpsConfig:
    """The operator surfaces (/health, /ready, /metrics, the dashboard). `port` 0 picks a
    free one (written to HERMES_HOME/ops.port); `host` unset keeps them on loopback;
    `freeze_seconds`: an event loop blocked this long exits 75 (the service restarts it)."""

    enabled: bool = True
    host: str | None = None
    port: int = attrs.field(default=9120, validator=_port)
    freeze_seconds: float = attrs.field(default=60.0, validator=_at_least(1))

    def bind_host(self) -> str:
        return self.host or "127.0.0.1"


@attrs.frozen
class Config:
    """The whole of config.yaml. `Config()` is the embedded default."""

    model: ModelConfig = ModelConfig()
    fallback_providers: tuple[ModelConfig, ...] = ()
    agent: AgentConfig = AgentConfig()
    gateway: GatewayConfig = GatewayConfig()
    cron: CronConfig = CronConfig()
    ops: OpsConfig = OpsConfig()
    retention: RetentionConfig = RetentionConfig()
    timezone: str | None = attrs.field(default=None, validator=_timezone)
    platforms: dict[str, PlatformConfig] = attrs.field(factory=dict)

    def zone(self) -> zoneinfo.ZoneInfo:
        """The configured timezone, else the machine's ($TZ, then /etc/localtime), else UTC."""
        return resolve_zone(self.timezone)

    def secret_names(self) -> list[str]:
        """The environment variables this config takes secrets from."""
        names = [m.api_key_env for m in (self.model, *self.fallback_providers)]
        for platform in self.platforms.values():
            names.extend(platform.token_names())
        return sorted({n for n in names if n})

    def enabled_platforms(self) -> dict[str, PlatformConfig]:
        return {name: p for name, p in self.platforms.items() if p.enabled}


def resolve_zone(name: str | None) -> zoneinfo.ZoneInfo:
    candidates = [name] if name else [os.environ.get("TZ", "").lstrip(":")]
    if not name:
        try:
            target = os.readlink("/etc/localtime")
            candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
        except OSError:
            pass
    for candidate in candidates:
        if candidate:
            try:
                return zoneinfo.ZoneInfo(candidate)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                continue
    return zoneinfo.ZoneInfo("UTC")


def _strict(kind: type) -> Any:
    """Refuse what YAML would silently coerce: "30" for a number, "yes" for a bool.

    NaN and infinity are refused here, for every number at once: they pass any
    range check (`nan <= 0` is false) and would turn timeouts into nonsense.
    """
    name = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[kind]

    def structure(value: Any, _type: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise _BadValue(f"expected {name}, got {value!r}")
        if kind in (int, float) and isinstance(value, float) and not math.isfinite(value):
            raise _BadValue(f"expected a finite number, got {value!r}")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise _BadValue(f"expected {name}, got {value!r}")
        return value

    return structure


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind in (bool, int, float, str):
        converter.register_structure_hook(kind, _strict(kind))
    return converter


_converter = _make_converter()


def _describe(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        keys = ", ".join(sorted(map(str, exc.extra_fields)))  # YAML keys may be 1, null, ...
        return f"unknown key{'s' if len(exc.extra_fields) > 1 else ''} {keys}"
    if isinstance(exc, _BadValue):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    if "not in literal" in str(exc):
        return f"must be one of {', '.join(map(repr, _type.__args__))}"
    if isinstance(exc, AttributeError | TypeError):
        return f"expected a mapping of {getattr(_type, '__name__', _type)} settings"
    return str(exc)


def _errors(exc: cattrs.BaseValidationError) -> list[str]:
    lines = []
    for line in cattrs.transform_error(exc, path="", format_exception=_describe):
        message, _, where = line.rpartition(" @ ")
        where = where.lstrip(".")
        # A validator names its own field: "key: problem" found at the parent path.
        if ": " in message and not message.startswith("unknown key"):
            field, _, problem = message.partition(": ")
            if field.isidentifier():
                where = f"{where}.{field}" if where else field
                message = problem
        if message.startswith("unknown key"):
            lines.append(f"{message} {('in ' + where) if where else 'at the top level'}")
        else:
            lines.append(f"{where}: {message}" if where else message)
    return lines


class InputError(ValueError):
    """Input that does not fit its record; the message names each bad key."""


def structure(data: Any, kind: type[T]) -> T:
    """`data` (parsed YAML or JSON) as a `kind` attrs record, strictly: no coercion
    ("30" is not a number, "yes" not a flag), no NaN or infinity, no unknown keys.
    The one way hermes checks structured input (config.yaml, the endpoint's params)."""
    try:
        return _converter.structure(data, kind)
    except cattrs.BaseValidationError as exc:
        raise InputError("; ".join(_errors(exc))) from None


def _within(where: str, problem: str) -> str:
    """A problem found in a platform's section, named from the top of config.yaml."""
    if problem.endswith(" at the top level"):
        return problem.removesuffix(" at the top level") + f" in {where}"
    if problem.startswith("unknown key"):
        return problem.replace(" in ", f" in {where}.", 1)
    return f"{where}.{problem}"


Sections = Mapping[str, type[PlatformConfig]]
"""Each platform's config section by name (the adapters' registry has them); a platform
not in it is read as the shared PlatformConfig."""


def parse_config(data: Any, source: str, sections: Sections | None = None) -> Config:
    """Structure already-parsed YAML into a Config, or raise ConfigError."""
    if data is None:
        return Config()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of settings")
    platforms = data.get("platforms")
    try:
        config = structure({k: v for k, v in data.items() if k != "platforms"}, Config)
    except InputError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if platforms is None:
        return config
    if not isinstance(platforms, Mapping):
        raise ConfigError(f"{source}: platforms: expected a mapping of platforms")
    read = {}
    for name, section in platforms.items():
        kind = (sections or {}).get(str(name), PlatformConfig)
        try:
            read[str(name)] = structure({} if section is None else section, kind)
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


def load_config(path: Path, sections: Sections | None = None) -> Config:
    """Read config.yaml; a missing file is the embedded default. `sections`: each
    platform's own settings class (hermes.adapters.registry.SECTIONS)."""
    text = _read_text(path)
    if text is None:
        return Config()
    try:
        data = yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    return parse_config(data, str(path), sections)


def dump_config(config: Config) -> dict[str, Any]:
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

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def hidden(self, names: list[str]) -> list[str]:
        """What must never be shown: the values of `names` (the secrets config names) and
        every value in .env (the file holds secrets only), overridden ones included."""
        return [v for v in (*(self.get(n) for n in names), *self._file_values) if v]

    def source(self, name: str) -> str:
        """Where a secret comes from: 'environment', '.env' or 'missing'."""
        if name not in self._values:
            return "missing"
        return ".env" if name in self._dotenv_names else "environment"
