"""The platforms' sections of config.yaml: what every platform under `platforms:` has
(each platform's own settings subclass it in its package), and `gateway`, whose
settings the adapters, the outbox and the gateway all read.

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import attrs

from hermes.config import BadValue, at_least, optional_seconds, port_number, positive, seconds

Busy = Literal["interrupt", "queue", "steer"]
"""What a message sent while a turn runs does (`gateway.busy`)."""


@attrs.frozen
class LocalEndpointConfig:
    """The local endpoint, for `hermes chat` and every client holding the serve token."""

    host: str = "127.0.0.1"
    """The address it listens on."""
    port: int = attrs.field(default=9119, validator=port_number)
    """Its port; 0 picks a free one (written to HERMES_HOME/serve.port)."""
    merge_window: float = attrs.field(default=0.0, validator=seconds)
    """Seconds its client's messages wait for more of a burst (0: a program's client
    sends whole messages)."""


@attrs.frozen
class WebhooksConfig:
    """The listener platforms with webhooks (WhatsApp) post to: its own, never the operator
    surfaces' port, so exposing webhooks never exposes the dashboard."""

    host: str = "127.0.0.1"
    """The address it listens on: loopback, behind your TLS reverse proxy."""
    port: int = attrs.field(default=9121, validator=port_number)
    """Its port; 0 picks a free one (written to HERMES_HOME/webhooks.port)."""
    max_body: int = attrs.field(default=1_048_576, validator=at_least(1024))
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
        raise BadValue(
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
    merge_window: float = attrs.field(default=1.5, validator=seconds)
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
    rate_limit: int = attrs.field(default=20, validator=at_least(0))
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
    bot_turns: int = attrs.field(default=3, validator=at_least(1))
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
    merge_window: float | None = attrs.field(default=None, validator=optional_seconds)
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

    # The setting that names what the platform logs in with (for the error when it is unset).
    login_setting: ClassVar[str] = "token_env"

    def token_names(self) -> list[str]:
        """Every variable the platform takes a secret from."""
        return [self.token_env] if self.token_env else []

    def answers_to(self) -> dict[str, str]:
        """The platforms this section's answers go to instead of its own chats, by the key
        that names each (an inbound webhook's routes' `deliver`): each must be enabled."""
        return {}

    def named_owners(self) -> frozenset[str]:
        """The user ids this section makes owners (`owner`; a platform's own settings may
        name more: an inbound webhook's routes with `role: owner`)."""
        return frozenset({self.owner}) if self.owner else frozenset()

    def login_named(self) -> bool:
        """Whether the variable the platform logs in with is named (`token_env`)."""
        return bool(self.token_env)
