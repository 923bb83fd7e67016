"""The MCP servers' section of config.yaml (`mcp`).

The docstring under each field of these classes is its line in docs/configuration.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from hermes.config import BadValue, Role, not_blank, positive

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")  # what a model's function name may hold


def _server_names(_inst: Any, attr: attrs.Attribute, value: Mapping[str, Any]) -> None:
    for name in value:
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name) or len(name) > 32:
            raise BadValue(
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
            raise BadValue("command: give exactly one of command (stdio) and url (HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise BadValue(f"url: must start with http:// or https://, got {self.url!r}")

    def secret_names(self) -> list[str]:
        """Every variable the server takes a secret from."""
        return [*self.env, *self.headers.values(), *([self.bearer_env] if self.bearer_env else [])]


@attrs.frozen
class McpConfig:
    """Tools from MCP servers: each server runs as an actor of its own, restarted with
    backoff when it dies."""

    servers: dict[str, McpServerConfig] = attrs.field(factory=dict, validator=_server_names)
    """The servers by name; a tool `t` of server `s` is offered as `mcp_s_t`."""
