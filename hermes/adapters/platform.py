"""What hermes knows of a chat platform, declared once in the platform's own package.

Delivery (limits, escaping, pace, deduplication), the serve tree (the adapter
factory), doctor (the token's hint) and the command environment (names of
variables that hold the platform's secrets) read a platform's `Platform`
record from the registry (hermes.adapters.registry) and never name it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets

if TYPE_CHECKING:
    from hermes.adapters.base import AdapterFactory

Unit = Literal["chars", "utf16"]


@attrs.frozen
class Limit:
    """The longest message a platform takes, in its own unit."""

    size: int = attrs.field(validator=attrs.validators.gt(0))
    unit: Unit = attrs.field(validator=attrs.validators.in_(("chars", "utf16")))


@attrs.frozen
class Pace:
    """A platform's documented steady rates, sends per second overall and per chat, and
    how many may go at once before the rate applies (a reply's few chunks go together;
    a flood of them goes at the steady rate)."""

    per_second: float = math.inf
    per_chat_per_second: float = math.inf
    burst: int = 1
    chat_burst: int = 3
    edits_per_second: float = math.inf  # edits of all chats, where the platform's are stricter
    edit_burst: int = 3


def as_is(text: str) -> str:
    """The escaping of a platform that sends text as it is."""
    return text


@attrs.frozen
class Platform:
    """One platform. `escape`: what its adapter does to a chunk before it sends it
    (chunks are measured after it); `pace`: None for no documented limit;
    `deduplicates`: the platform drops a repeat of a send's idempotency key, or its
    adapter asks whether a send handed over before arrived (`SendRequest.again`) before
    it goes again (a send that may have arrived is sent again after a restart);
    `secret_variables`: name
    patterns of environment variables that hold its secrets (kept out of commands);
    `token_hint`: where its token comes from, for doctor; `adapter`: its adapter
    class as "module:Name", imported only when `factory` is read (None for the local
    endpoint, which the serve tree builds itself), so naming a platform costs nothing
    until serve runs it; `settings`:
    its section of config.yaml (PlatformConfig, or its own subclass of it); `edits`: its
    adapter edits a sent message (SendRequest.edit_of), so a turn's progress can show
    in one message; `webhook`: its deliveries come to the webhook listener
    (`/webhooks/<name>`), which runs while such a platform is enabled; `tokens`: it
    takes a secret from a variable (Signal's daemon holds its own); `max_upload`: the
    largest file its adapter sends, in bytes (0: it sends none); `foreign_text`: why a
    message's text holds others' words whoever sent it (a mail quotes the thread it
    answers), so a turn that reads it is marked untrusted (None: the sender's own);
    `streams`: its adapter answers within the request that asked (the local endpoint, the
    API): it is handed every step of a turn, the final one is the answer, and nothing of
    it goes through the outbox;
    `asks`: the keys of its section `hermes setup` asks for, in order (a key ending in
    `_env` is asked as a secret, stored in HERMES_HOME/.env);
    `way_in`: its events are answered where its section says (`InboundEvent.answer_to`),
    and nothing is ever sent to it; `tools`: the agent's tools its enabled section offers,
    as "module:function" (a function of the section and the secrets answering the tools
    by name), imported only when the agent is built."""

    name: str
    limit: Limit
    adapter: str | None
    escape: Callable[[str], str] = as_is
    pace: Pace | None = None
    deduplicates: bool = False
    secret_variables: tuple[str, ...] = ()
    token_hint: str = "the token the platform issued"
    settings: type[PlatformConfig] = PlatformConfig
    edits: bool = False
    webhook: bool = False
    tokens: bool = True
    max_upload: int = 0
    foreign_text: str | None = None
    streams: bool = False
    asks: tuple[str, ...] = ()
    way_in: bool = False
    tools: str | None = None

    @property
    def factory(self) -> AdapterFactory | None:
        """The adapter class, imported now."""
        if self.adapter is None:
            return None
        module, name = self.adapter.split(":")
        return getattr(importlib.import_module(module), name)

    def tools_of(self, section: PlatformConfig, secrets: Secrets) -> dict[str, Any]:
        """The agent's tools `section` (this platform's, enabled) offers, by name."""
        if self.tools is None:
            return {}
        module, name = self.tools.split(":")
        return getattr(importlib.import_module(module), name)(section, secrets)
