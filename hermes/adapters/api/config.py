"""The API's section of config.yaml: where it listens and which keys it takes."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from hermes.adapters.settings import Busy, PlatformConfig
from hermes.config import VARIABLE_NAME, BadValue, at_least, optional_seconds, port_number


def _keys(_inst: Any, attr: attrs.Attribute, value: dict[str, str]) -> None:
    for variable, user in value.items():
        if not VARIABLE_NAME.fullmatch(variable):
            raise BadValue(f"{attr.name}: {variable!r} is not an environment variable's name")
        if not user.strip() or user != user.strip() or ":" in user:
            raise BadValue(
                f"{attr.name}: {variable}'s user {user!r} must be an id without spaces or ':'"
            )


@attrs.frozen
class ApiConfig(PlatformConfig):
    """The OpenAI-compatible API's own settings, beside those every platform has. Every
    key's user may talk (`allow_all_users` is on: the key is the gate); who is an owner is
    `owner` or `gateway.owners` (`api:alice`)."""

    host: str = "127.0.0.1"
    """The address it listens on: loopback, behind your TLS reverse proxy for others."""
    port: int = attrs.field(default=9122, validator=port_number)
    """Its port; 0 picks a free one (written to HERMES_HOME/api.port)."""
    keys: dict[str, str] = attrs.field(factory=dict, validator=_keys)
    """The keys it takes, as `VARIABLE: user`: the variable (in .env or the environment)
    holds a bearer key, and a request with it is that user's (required)."""
    max_body: int = attrs.field(default=1_048_576, validator=at_least(1024))
    """Bytes a request may have; a longer one is refused (413) unread."""
    allow_all_users: bool = True
    """Every key's user may talk (the key is the gate)."""
    busy: Busy | None = "queue"
    """A request to a conversation whose turn runs waits for it (`gateway.busy`)."""
    merge_window: float | None = attrs.field(default=0.0, validator=optional_seconds)
    """A request is a whole message: none waits for more of a burst."""

    login_setting: ClassVar[str] = "keys"

    def token_names(self) -> list[str]:
        return sorted(self.keys)

    def login_named(self) -> bool:
        return bool(self.keys)
