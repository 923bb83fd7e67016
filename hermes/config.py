"""config.yaml as typed attrs classes, with a default for everything.

A bad file (unknown key, wrong type, bad value, broken YAML, not UTF-8) raises ConfigError
naming the file and the key path; nothing half-loaded is ever returned.
Secrets never live in config.yaml: it names environment variables, whose
values come from the process environment or HERMES_HOME/.env.
"""

from __future__ import annotations

import difflib
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


def _seconds(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if not 0 <= value <= 60:
        raise _BadValue(f"{attr.name}: must be between 0 and 60 seconds, got {value!r}")


def _optional_seconds(inst: Any, attr: attrs.Attribute, value: float | None) -> None:
    if value is not None:
        _seconds(inst, attr, value)


def _share(_inst: Any, attr: attrs.Attribute, value: float) -> None:
    if not 0.1 <= value <= 0.95:
        raise _BadValue(f"{attr.name}: must be between 0.1 and 0.95, got {value!r}")


def _optional_at_least(minimum: int):
    check = _at_least(minimum)

    def optional(inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is not None:
            check(inst, attr, value)

    return optional


Busy = Literal["interrupt", "queue", "steer"]
"""What a message sent while a turn runs does (`gateway.busy`)."""

RENAMED = {
    "busy_mode": "gateway.busy",
    "require_mention": "groups.activation: mention or always",
    "group_sessions_per_user": "platforms.<name>.groups.sessions: per_user or shared",
}
"""Keys an earlier release read, and what took their place: named in the error."""


@attrs.frozen
class ModelConfig:
    """One model provider: the model, or one of its fallbacks. (The docstring under
    each field of these classes is its line in docs/configuration.md.)"""

    provider: str = "offline"
    """`offline` (the built-in model: no network, deterministic), or a name you choose
    for an OpenAI-compatible chat-completions endpoint."""
    model: str = "hermes-offline"
    """The model's name, as the provider knows it."""
    base_url: str | None = None
    """The endpoint's base URL (`https://api.openai.com/v1`); every provider but `offline`
    needs one."""
    api_key_env: str | None = None
    """The environment variable holding the API key (never the key itself); unset: no key
    is sent."""
    context_tokens: int | None = attrs.field(default=None, validator=_optional_at_least(1000))
    """The model's context window in tokens (at least 1000); unset: 128000, or 8000 for
    `offline`."""
    multimodal: bool = False
    """The model reads images: a user's images go to it as image parts (otherwise as a
    line saying an image came that it cannot see)."""
    image_max_px: int = attrs.field(default=1568, validator=_at_least(64))
    """An image's longest side as sent to the model, in pixels: larger ones are
    downscaled first (and the result kept in the cache)."""


Role = Literal["owner", "user"]  # who may do what; see hermes.agent.permissions
OWNER_TOOLS = ("*",)
USER_TOOLS = (
    "memory",
    "session_search",
    "send_message",
    "send_file",
    "skills_list",
    "skill_view",
    "skill_manage",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "todo",
    "clarify",
)


@attrs.frozen
class ToolsConfig:
    """Which tools each role may call, in one place. A tool a role may not call is never
    offered to its sessions."""

    owner: tuple[str, ...] = OWNER_TOOLS
    """The tools an owner may call; `*` is every tool."""
    user: tuple[str, ...] = USER_TOOLS
    """The tools every other user let in may call (`terminal` or `process` here gives every
    user a shell on this machine)."""
    pass_env: tuple[str, ...] = ()
    """Variables an owner's commands get besides PATH, HOME, LANG, LC_ALL, TERM, TZ, USER and
    LOGNAME (a command's environment is built from that list; a user's commands get only
    those)."""


@attrs.frozen
class DelegateConfig:
    """Subagents: the turns `delegate_task` runs for one turn, each with its own
    conversation and a subset of the parent's tools."""

    max_depth: int = attrs.field(default=1, validator=_at_least(1))
    """How deep delegation goes: 1, a turn's subagents may not delegate again."""
    max_parallel: int = attrs.field(default=3, validator=_at_least(1))
    """Subagents of one turn running at once; the others wait for a place."""
    max_total: int = attrs.field(default=10, validator=_at_least(1))
    """Subagents one turn may start in all; more are refused with the reason."""
    timeout: float = attrs.field(default=600.0, validator=positive)
    """Seconds a subagent may run before it is stopped and reported timed out."""
    answer_chars: int = attrs.field(default=4000, validator=_at_least(100))
    """Characters of each subagent's answer the parent gets (the rest is cut, and said)."""


@attrs.frozen
class AgentConfig:
    """The agent's turns: how many model calls, which tools, and when a long conversation
    is compacted."""

    max_turns: int = attrs.field(default=20, validator=_at_least(1))
    """The model calls one turn may make at most."""
    compact_at: float = attrs.field(default=0.75, validator=_share)
    """The share of the model's context window a prompt may fill before the conversation is
    compacted (0.1 to 0.95)."""
    keep_turns: int = attrs.field(default=4, validator=_at_least(1))
    """The most recent turns compaction never touches."""
    tools: ToolsConfig = ToolsConfig()
    """Which tools each role may call, and what a command's environment keeps."""
    workdir: str | None = attrs.field(default=None, validator=not_blank)
    """Where every conversation's commands start; unset: a directory per session,
    HERMES_HOME/workspace/<session>. Never HERMES_HOME itself."""
    approval_timeout: float = attrs.field(default=300.0, validator=positive)
    """Seconds a guarded command (sudo, a download piped into a shell...) waits for an
    owner's approval in the chat before the request expires and the model is told."""
    delegate: DelegateConfig = DelegateConfig()
    """Subagents (`delegate_task`): how many, how deep, how long."""
    clarify_timeout: float = attrs.field(default=600.0, validator=positive)
    """Seconds a question the agent asks (`clarify`) waits for the user's answer."""

    def workdir_path(self) -> Path | None:
        return Path(self.workdir).expanduser() if self.workdir else None


def _absolute_paths(_inst: Any, attr: attrs.Attribute, value: tuple[str, ...]) -> None:
    for path in value:
        if not path.startswith("/"):
            raise _BadValue(f"{attr.name}: {path!r} is not an absolute path")


HIDDEN_IN_SANDBOX = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/hermes",
)


@attrs.frozen
class SandboxConfig:
    """The bubblewrap sandbox: what a confined command sees of this machine. It sees
    /usr, /bin, /lib*, /etc (less `hide`) and `read_only`, read-only; a private /tmp; its
    session's directory read-write, as its working directory and HOME; nothing else."""

    owner: Literal["host", "sandbox"] = "host"
    """Where an owner's commands run: `host` (the backend, unconfined, as a personal
    assistant that manages its own server expects) or `sandbox`. A user's always run in
    the sandbox."""
    hide: tuple[str, ...] = attrs.field(default=HIDDEN_IN_SANDBOX, validator=_absolute_paths)
    """Paths under /etc (or `read_only`) a sandboxed command never sees (globs; absolute)."""
    read_only: tuple[str, ...] = attrs.field(default=(), validator=_absolute_paths)
    """More paths a sandboxed command sees, read-only (`/opt`, a toolchain); never
    HERMES_HOME or a directory holding it."""


@attrs.frozen
class NetworkConfig:
    """What a sandboxed command may reach over the network."""

    users: Literal["none", "public"] = "none"
    """A user's commands: `none` (no network at all) or `public` (the public internet
    through hermes's proxy: never loopback, private ranges or the cloud metadata
    address). An owner's sandboxed commands always get `public`."""


@attrs.frozen
class SshConfig:
    """The ssh backend: an owner's unconfined commands run on another machine, through
    this machine's OpenSSH client."""

    host: str | None = attrs.field(default=None, validator=not_blank)
    """The machine's name or address (required with `backend: ssh`)."""
    port: int = attrs.field(default=22, validator=_port)
    """Its SSH port."""
    user: str | None = attrs.field(default=None, validator=not_blank)
    """The user to log in as (required with `backend: ssh`)."""
    key: str | None = attrs.field(default=None, validator=not_blank)
    """The private key's path on this machine (required with `backend: ssh`)."""
    known_hosts: str | None = attrs.field(default=None, validator=not_blank)
    """A known_hosts file holding the machine's host key; unset: ~/.ssh/known_hosts. An
    unknown or changed host key refuses the connection."""
    workdir: str | None = attrs.field(default=None, validator=not_blank)
    """Where commands start on the machine; unset: the user's home there."""
    connect_timeout: float = attrs.field(default=10.0, validator=positive)
    """Seconds to wait for the connection."""


@attrs.frozen
class TerminalConfig:
    """Where commands run: the backend for an owner's, the sandbox for a user's and for a
    turn that read untrusted text."""

    backend: Literal["host", "ssh"] = "host"
    """Where unconfined commands run: `host` (this machine) or `ssh` (the machine `ssh`
    names)."""
    sandbox: SandboxConfig = SandboxConfig()
    """The sandbox (bubblewrap) and who runs in it."""
    network: NetworkConfig = NetworkConfig()
    """Network access in the sandbox."""
    after_untrusted: Literal["sandbox", "approve", "host"] = "sandbox"
    """An owner's command in a turn whose context holds untrusted text (a web page, an MCP
    server's answer, someone else's message or mail, a file sent): `sandbox` runs it
    confined, `approve` asks an owner before it runs unconfined, `host` runs it as any
    other."""
    ssh: SshConfig = SshConfig()
    """The ssh backend's machine."""

    def __attrs_post_init__(self) -> None:
        if self.backend == "ssh":
            missing = [k for k in ("host", "user", "key") if getattr(self.ssh, k) is None]
            if missing:
                raise _BadValue(f"ssh: backend ssh needs {', '.join(missing)}")


@attrs.frozen
class LocalEndpointConfig:
    """The local endpoint, for `hermes chat` and every client holding the serve token."""

    host: str = "127.0.0.1"
    """The address it listens on."""
    port: int = attrs.field(default=9119, validator=_port)
    """Its port; 0 picks a free one (written to HERMES_HOME/serve.port)."""
    merge_window: float = attrs.field(default=0.0, validator=_seconds)
    """Seconds its client's messages wait for more of a burst (0: a program's client
    sends whole messages)."""


@attrs.frozen
class WebhooksConfig:
    """The listener platforms with webhooks (WhatsApp) post to: its own, never the operator
    surfaces' port, so exposing webhooks never exposes the dashboard."""

    host: str = "127.0.0.1"
    """The address it listens on: loopback, behind your TLS reverse proxy."""
    port: int = attrs.field(default=9121, validator=_port)
    """Its port; 0 picks a free one (written to HERMES_HOME/webhooks.port)."""
    max_body: int = attrs.field(default=1_048_576, validator=_at_least(1024))
    """Bytes a delivery may have; a longer one is refused (413) unread."""


def _platform_ids(_inst: Any, attr: attrs.Attribute, value: tuple[str, ...]) -> None:
    """Ids of every platform are `platform:id`: a Telegram id can equal a WhatsApp number."""
    for entry in value:
        platform, colon, user = entry.partition(":")
        if not colon or not re.fullmatch(r"[a-z][a-z0-9_]*", platform):
            problem = "has no platform"
        elif not user.strip() or user != user.strip():
            problem = "has no id" if not user.strip() else "has spaces around its id"
        else:
            continue
        raise _BadValue(
            f"{attr.name}: {entry!r} {problem}: write it as PLATFORM:ID, e.g. telegram:123"
        )


def _ids_on(entries: tuple[str, ...], platform: str) -> frozenset[str]:
    return frozenset(u for p, _, u in (e.partition(":") for e in entries) if p == platform)


@attrs.frozen
class GatewayConfig:
    """How messages become turns: conversations, who may talk and how fast, restarts."""

    drain_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds in-flight turns and fires get to finish when serve stops."""
    busy: Busy = "interrupt"
    """A message that arrives mid-turn: `interrupt` stops the running turn and starts one
    with it, `queue` runs it after (at most 16 wait), `steer` adds it to the running turn
    before its next model call. A platform's `busy` and a session's `/busy` override it."""
    merge_window: float = attrs.field(default=1.5, validator=_seconds)
    """Seconds: messages from one user in one chat that arrive within this of each other
    are one turn (a long paste split in parts, a photo then its question); 0: off. A
    platform's `merge_window` overrides it."""
    follow: Literal["off", "last"] = "off"
    """`last`: a person with linked accounts (`/link`) continues their most recent
    conversation from whichever platform they write on, as `/continue` does once."""
    thread_sessions_per_user: bool = True
    """In a thread (a Slack thread, a Telegram topic, a Matrix thread), each user has a
    conversation of their own; `false` shares the thread's, where only an owner may /new,
    /stop, /undo, /retry or /compress it."""
    local: LocalEndpointConfig = LocalEndpointConfig()
    """The local endpoint: JSON-RPC 2.0 over WebSocket on loopback."""
    webhooks: WebhooksConfig = WebhooksConfig()
    """The webhook listener (only while a platform with webhooks is enabled)."""
    allowed_users: tuple[str, ...] = attrs.field(default=(), validator=_platform_ids)
    """Users allowed to talk, on any platform, written `platform:id` (`telegram:123`,
    `whatsapp:15551234567`)."""
    owners: tuple[str, ...] = attrs.field(default=(), validator=_platform_ids)
    """Owners, written `platform:id`; while it names anyone, pairing makes no owner."""
    resume_window: float = attrs.field(default=600.0, validator=positive)
    """Seconds: a turn cut by a restart is answered after it if it is younger than this."""
    rate_limit: int = attrs.field(default=20, validator=_at_least(0))
    """Messages a user may send a minute on a platform, commands included (0: no limit)."""
    progress_interval: float = attrs.field(default=1.5, validator=positive)
    """Seconds between edits of a message that shows a turn's progress (and before the
    first: a quick answer comes as one message)."""

    def owners_on(self, platform: str) -> frozenset[str]:
        """The user ids `owners` names on `platform` (an id may hold colons: Matrix's)."""
        return _ids_on(self.owners, platform)

    def allowed_on(self, platform: str) -> frozenset[str]:
        """The user ids `allowed_users` names on `platform`."""
        return _ids_on(self.allowed_users, platform)


@attrs.frozen
class GroupsConfig:
    """A platform's groups and channels: when the bot speaks, whose conversation it is,
    and other bots."""

    activation: Literal["mention", "always", "reply"] = "mention"
    """When a message there is answered: `mention` (the bot is mentioned or replied to,
    or a command is addressed to it), `reply` (only a reply to the bot's own message, or
    a command), `always` (every message from an allowed user)."""
    sessions: Literal["shared", "per_user"] = "per_user"
    """Outside threads: `per_user` gives each user a conversation of their own, `shared`
    one for everyone in the chat (where only an owner may /new, /stop, /undo, /retry or
    /compress it)."""
    bots: Literal["ignore", "answer"] = "ignore"
    """Messages from other bots: `ignore`, or `answer` those the allow list names."""
    bot_turns: int = attrs.field(default=3, validator=_at_least(1))
    """With `bots: answer`, at most this many bot-started turns in a row in one chat (a
    person's message starts the count again): two bots never talk for ever."""


@attrs.frozen
class PlatformConfig:
    """What every chat platform under `platforms:` has. A platform with settings of its
    own subclasses it in its package (its `Platform.settings`)."""

    enabled: bool = True
    """`false` keeps the section but starts no adapter."""
    token_env: str | None = None
    """The environment variable holding the platform's bot token (required)."""
    base_url: str | None = None
    """The platform's API address; unset: the real service's."""
    allowed_users: tuple[str, ...] = ()
    """Platform user ids that may talk to the bot, quoted (they are text)."""
    allow_all_users: bool = False
    """Let every user talk to the bot: no allowlist, no pairing."""
    allowed_chats: tuple[str, ...] = ()
    """The groups or channels the bot answers in under `group_policy: allowlist`."""
    group_policy: Literal["allowlist", "open", "disabled"] = "allowlist"
    """Groups and channels: `allowlist` (only `allowed_chats`), `open` (any), `disabled`
    (none)."""
    groups: GroupsConfig = GroupsConfig()
    """How the bot behaves in groups and channels."""
    busy: Busy | None = None
    """`gateway.busy` for this platform's chats (unset: the gateway's)."""
    merge_window: float | None = attrs.field(default=None, validator=_optional_seconds)
    """`gateway.merge_window` for this platform (unset: the gateway's)."""
    home_channel: str | None = None
    """Where cron briefs and notices without a chat go, as `chat[:thread]`; `/sethome`
    overrides it."""
    owner: str | None = None
    """The user id that is owner on this platform; unset: the users `hermes pairing approve
    --owner` made owners here (none while `gateway.owners` names anyone)."""
    progress: Literal["off", "tools", "stream"] | None = None
    """What a chat sees while a turn runs long: `off` (one message at the end), `tools` (a
    status message listing each tool as it runs, edited in place, then the answer),
    `stream` (the answer edited into one message as it is written, tool lines under it).
    Unset: `stream` where the platform can edit messages, else `off`."""

    def token_names(self) -> list[str]:
        """Every variable the platform takes a secret from."""
        return [self.token_env] if self.token_env else []

    def login_named(self) -> bool:
        """Whether the variable the platform logs in with is named (`token_env`)."""
        return bool(self.token_env)


@attrs.frozen
class CronConfig:
    """Scheduled jobs: what they do around a fire, and the lease every fire holds."""

    failure_nudge_threshold: int = attrs.field(default=3, validator=_at_least(0))
    """Failures in a row after which a recurring job's failure notice asks you to review
    it (0: never)."""
    mirror_delivery: bool = False
    """Write a brief delivered to its job's origin chat into that chat's conversation too,
    so a reply continues from it."""
    catch_up: bool = True
    """A run missed beyond its grace window fires once when serve is back (a job's own
    `--no-catch-up` turns it off for that job)."""
    lease_seconds: float = attrs.field(default=60.0, validator=positive)
    """How long a fire's claim on its job holds without renewal; a fire that loses it is
    cancelled."""
    heartbeat_seconds: float = attrs.field(default=20.0, validator=positive)
    """How often a running fire renews its lease (keep it near a third of
    `lease_seconds`)."""


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")  # what a model's function name may hold


def _server_names(_inst: Any, attr: attrs.Attribute, value: Mapping[str, Any]) -> None:
    for name in value:
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name) or len(name) > 32:
            raise _BadValue(
                f"{attr.name}: {name!r} is not a server name (letters, digits, _ and -, at"
                " most 32: it becomes part of each tool's name)"
            )


@attrs.frozen
class McpServerConfig:
    """One MCP server: a command hermes runs (stdio), or a URL it connects to (Streamable
    HTTP). Exactly one of `command` and `url`."""

    command: str | None = attrs.field(default=None, validator=not_blank)
    """The program of a stdio server (`npx`, `uvx`, a path); its whole process tree is
    killed when serve stops it."""
    args: tuple[str, ...] = ()
    """The program's arguments."""
    env: tuple[str, ...] = ()
    """Names of the variables (from the environment or HERMES_HOME/.env) the server gets;
    it gets no other secret."""
    cwd: str | None = attrs.field(default=None, validator=not_blank)
    """Where the program starts; unset: HERMES_HOME/workspace."""
    url: str | None = attrs.field(default=None, validator=not_blank)
    """The endpoint of a Streamable HTTP server."""
    headers: dict[str, str] = attrs.field(factory=dict)
    """HTTP headers, each mapped to the variable holding its value (`X-Api-Key: MY_KEY`)."""
    bearer_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding an OAuth bearer token for the HTTP server."""
    enabled: bool = True
    """`false` keeps the section but starts nothing."""
    tools: tuple[str, ...] = ("*",)
    """The server's tools offered to the model, by name or glob (`read_*`)."""
    timeout: float = attrs.field(default=60.0, validator=positive)
    """Seconds one tool call may take; then it is cancelled and the model told."""
    roles: tuple[Role, ...] = ("owner",)
    """Which roles' sessions are offered the server's tools (`owner`, `user`)."""

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise _BadValue("command: give exactly one of command (stdio) and url (HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise _BadValue(f"url: must start with http:// or https://, got {self.url!r}")

    def secret_names(self) -> list[str]:
        """Every variable the server takes a secret from."""
        return [*self.env, *self.headers.values(), *([self.bearer_env] if self.bearer_env else [])]


@attrs.frozen
class McpConfig:
    """Tools from MCP servers: each server runs as an actor of its own, restarted with
    backoff when it dies."""

    servers: dict[str, McpServerConfig] = attrs.field(factory=dict, validator=_server_names)
    """The servers by name; a tool `t` of server `s` is offered as `mcp_s_t`."""


@attrs.frozen
class SearchConfig:
    """Where web_search asks; with no provider the tool is not offered."""

    provider: Literal["searxng", "brave", "tavily"] | None = None
    """`searxng` (your instance, its `url`), `brave` or `tavily` (a key in `key_env`)."""
    url: str | None = attrs.field(default=None, validator=not_blank)
    """SearXNG's base URL (required for it); for brave and tavily, their API unless set."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key (brave, tavily)."""
    results: int = attrs.field(default=5, validator=_at_least(1))
    """Results returned per search (at most 20)."""

    def __attrs_post_init__(self) -> None:
        if self.provider == "searxng" and self.url is None:
            raise _BadValue("url: searxng needs the base URL of your instance")
        if self.provider in ("brave", "tavily") and self.key_env is None:
            raise _BadValue(f"key_env: {self.provider} needs the variable holding its key")
        if self.results > 20:
            raise _BadValue(f"results: at most 20, got {self.results}")


@attrs.frozen
class WebConfig:
    """The web tools: web_fetch reads a page, web_search asks a search provider."""

    allow_private: tuple[str, ...] = ()
    """Hosts, addresses or ranges (`10.0.0.0/8`) web_fetch may reach although they are
    loopback, private, link-local or cloud metadata; everything else of that kind is
    refused."""
    search: SearchConfig = SearchConfig()
    """The search provider."""


@attrs.frozen
class TranscribeConfig:
    """Speech to text: an OpenAI-compatible `/audio/transcriptions` endpoint."""

    base_url: str | None = attrs.field(default=None, validator=not_blank)
    """The endpoint's base URL (`https://api.openai.com/v1`); unset: voice notes are not
    transcribed, and the model is told one arrived that it cannot hear."""
    model: str = "whisper-1"
    """The speech model, as the provider knows it."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key; unset: no key is sent."""
    max_mb: float = attrs.field(default=24.0, validator=positive)
    """The most one request may carry (OpenAI's limit is 25 MB); longer audio is cut into
    `chunk_seconds` pieces with ffmpeg where it is installed, else not transcribed."""
    chunk_seconds: int = attrs.field(default=600, validator=_at_least(30))
    """The length of each piece of long audio."""


@attrs.frozen
class SpeakConfig:
    """Voice replies: an answer read aloud by an OpenAI-compatible `/audio/speech`
    endpoint and sent as a voice note."""

    base_url: str | None = attrs.field(default=None, validator=not_blank)
    """The endpoint's base URL; unset: no voice replies."""
    model: str = "tts-1"
    """The speech model."""
    voice: str = "alloy"
    """The voice, as the provider names it."""
    key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the provider's API key; unset: no key is sent."""
    platforms: tuple[str, ...] = ()
    """The platforms whose chats get voice replies (opt in per platform)."""
    mode: Literal["beside", "instead"] = "beside"
    """`beside`: the voice note follows the text; `instead`: the voice note alone, the text
    held back `hold` seconds and sent only if no voice note could be made (these
    platforms show no progress: a streamed answer would show the text)."""
    hold: float = attrs.field(default=150.0, validator=positive)
    """Seconds the text waits, in `instead` mode, for its voice note."""
    max_chars: int = attrs.field(default=4000, validator=_at_least(1))
    """Answers longer than this are not read aloud (the text goes as usual)."""

    def __attrs_post_init__(self) -> None:
        if self.platforms and self.base_url is None:
            raise _BadValue("base_url: voice replies need the speech endpoint's base URL")


@attrs.frozen
class MediaConfig:
    """Media both ways: what a chat sends is fetched (after authorization) into
    HERMES_HOME/cache/<platform>/, voice is transcribed, images go to a multimodal model,
    and files and voice notes go back."""

    max_file_mb: float = attrs.field(default=20.0, validator=positive)
    """The largest file fetched from a chat, in MB (Telegram's bots cannot fetch more
    than 20)."""
    per_chat_hour_mb: float = attrs.field(default=200.0, validator=positive)
    """The most media one chat may have fetched in an hour, in MB; past it attachments
    are left unfetched (the message is still answered)."""
    cache_mb: float = attrs.field(default=500.0, validator=positive)
    """The most a platform's cache holds, in MB: the oldest files are evicted first."""
    cache_days: float = attrs.field(default=30.0, validator=positive)
    """Cached files older than this are evicted."""
    transcribe: TranscribeConfig = TranscribeConfig()
    """Speech to text for voice notes and audio."""
    speak: SpeakConfig = SpeakConfig()
    """Voice replies."""

    def __attrs_post_init__(self) -> None:
        if self.cache_mb < self.max_file_mb:
            raise _BadValue(
                f"cache_mb: {self.cache_mb:g} cannot hold one file of max_file_mb "
                f"({self.max_file_mb:g})"
            )


@attrs.frozen
class RetentionConfig:
    """How long what piles up in state.db is kept; serve prunes it every `prune_every`
    seconds while it runs, never what is still needed."""

    journal_days: float = attrs.field(default=7.0, validator=positive)
    """Days inbound events are kept (a duplicate is recognised within them), and ended
    approval requests."""
    outbox_sent_days: float = attrs.field(default=30.0, validator=positive)
    """Days sent outbox rows are kept (unsent, dead and unknown ones stay)."""
    cron_runs_per_job: int = attrs.field(default=200, validator=_at_least(1))
    """The newest runs kept per job (a running one stays)."""
    cron_deliveries_days: float = attrs.field(default=30.0, validator=positive)
    """Days the records of where cron briefs went are kept."""
    pairing_failures_hours: float = attrs.field(default=24.0, validator=_at_least(2))
    """Hours failed pairing approvals are kept (at least the 2 the lockout looks back)."""
    prune_every: float = attrs.field(default=3600.0, validator=_at_least(60))
    """Seconds between pruning passes (at least 60); one also runs at start."""


@attrs.frozen
class OpsConfig:
    """The operator surfaces (/health, /ready, /metrics, the dashboard) and the watchdog of
    the event loop."""

    enabled: bool = True
    """`false`: serve runs neither the operator surfaces nor the watchdog."""
    host: str | None = None
    """The address they listen on; unset: 127.0.0.1 only (beyond it, put TLS in front)."""
    port: int = attrs.field(default=9120, validator=_port)
    """Their port; 0 picks a free one (written to HERMES_HOME/ops.port)."""
    freeze_seconds: float = attrs.field(default=60.0, validator=_at_least(1))
    """An event loop blocked this long logs every stack and exits 75, for the service
    manager to restart it."""

    def bind_host(self) -> str:
        return self.host or "127.0.0.1"


def _skill_roles(_inst: Any, attr: attrs.Attribute, value: dict[str, tuple[str, ...]]) -> None:
    """Each named skill's roles (each an owner or user, as Role's type checks): not none."""
    for name, roles in value.items():
        if not roles:
            raise _BadValue(f"{attr.name}.{name}: name owner, user or both")


@attrs.frozen
class SkillsConfig:
    """Skills: folders of instructions under HERMES_HOME/skills that the agent opens when a
    task needs them."""

    roles: dict[str, tuple[Role, ...]] = attrs.field(factory=dict, validator=_skill_roles)
    """Which roles may use a shared skill, by its name (`owner` alone: owners only); unset:
    every role, unless the skill's own front matter says owners only."""
    index_chars: int = attrs.field(default=3_000, validator=_at_least(200))
    """How much of every system prompt the list of skills (names and descriptions) may take;
    the rest are named by `skills_list`."""
    remind_after: int = attrs.field(default=8, validator=_at_least(1))
    """Tool calls in one turn after which the agent is reminded, once, that it may save what
    it learned as a skill."""


@attrs.frozen
class Config:
    """The whole of config.yaml. `Config()` is the embedded default."""

    model: ModelConfig = ModelConfig()
    """The model that answers: with no configuration, the built-in offline one."""
    fallback_providers: tuple[ModelConfig, ...] = ()
    """Providers tried in order when the model cannot answer; each entry has the keys of
    `model`."""
    agent: AgentConfig = AgentConfig()
    """The agent's turns: model calls, tools, and compaction of long conversations."""
    terminal: TerminalConfig = TerminalConfig()
    """Where commands run: the host, the sandbox, another machine over ssh."""
    gateway: GatewayConfig = GatewayConfig()
    """How messages become turns: conversations, who may talk, rate limits, restarts."""
    cron: CronConfig = CronConfig()
    """Scheduled jobs."""
    ops: OpsConfig = OpsConfig()
    """The operator surfaces over HTTP and the event loop's watchdog."""
    retention: RetentionConfig = RetentionConfig()
    """How long state.db keeps what piles up."""
    timezone: str | None = attrs.field(default=None, validator=_timezone)
    """The IANA zone (`Europe/Berlin`) schedules are read in; unset: the machine's ($TZ,
    then /etc/localtime), else UTC."""
    platforms: dict[str, PlatformConfig] = attrs.field(factory=dict)
    """The chat platforms, one section each (below)."""
    mcp: McpConfig = McpConfig()
    """Tools from MCP servers."""
    web: WebConfig = WebConfig()
    """The web tools."""
    media: MediaConfig = MediaConfig()
    """Attachments, voice and images, both ways."""
    skills: SkillsConfig = SkillsConfig()
    """Skills the agent may open, and who may use them."""

    def zone(self) -> zoneinfo.ZoneInfo:
        """The configured timezone, else the machine's ($TZ, then /etc/localtime), else UTC."""
        return resolve_zone(self.timezone)

    def secret_names(self) -> list[str]:
        """The environment variables this config takes secrets from."""
        names = [m.api_key_env for m in (self.model, *self.fallback_providers)]
        for platform in self.platforms.values():
            names.extend(platform.token_names())
        for server in self.mcp.servers.values():
            names.extend(server.secret_names())
        names.append(self.web.search.key_env)
        names += [self.media.transcribe.key_env, self.media.speak.key_env]
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
        extra = sorted(map(str, exc.extra_fields))  # YAML keys may be 1, null, ...
        known = [f.name for f in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        moved = [f"{key} is now {RENAMED[key]}" for key in extra if key in RENAMED]
        meant = [m for key in extra for m in difflib.get_close_matches(key, known, 1, 0.7)]
        hint = f" (did you mean {', '.join(meant)}?)" if meant else ""
        hint = f" ({'; '.join(moved)})" if moved else hint
        return f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}{hint}"
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
            keys, paren, hint = message.partition(" (")
            place = f"in {where}" if where else "at the top level"
            lines.append(f"{keys} {place}{paren}{hint}")
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
    if " at the top level" in problem:
        return problem.replace(" at the top level", f" in {where}", 1)
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
    unknown = [p for p in config.media.speak.platforms if p not in (platforms or {})]
    if unknown:
        raise ConfigError(
            f"{source}: media.speak.platforms: {', '.join(unknown)} not under platforms"
        )
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
