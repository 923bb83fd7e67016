"""What an MCP server's actor is built with and what it shows, apart from the SDK: the
CLI, the serve tree and the readiness check name these without importing `mcp`, which
takes longer to import than the rest of hermes (it is loaded once a server starts)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from hermes.actors.errors import Unavailable
from hermes.agent.mcp.settings import McpServerConfig
from hermes.config import Secrets
from hermes.terminal.env import EnvPolicy

START_TIMEOUT = 60.0  # seconds to initialize and list tools (npx may download first)


class ServerEnded(Unavailable):
    """The server went away (its process exited, its endpoint failed)."""


@attrs.frozen
class McpSetup:
    """What every server's actor is built with: the secrets its config names, the
    environment its process may have (no secret of serve's), where it starts unless
    its config says, and the redactor for what it says on stderr."""

    secrets: Secrets = attrs.field(repr=False)
    policy: EnvPolicy = attrs.field(repr=False)
    workspace: Path  # made by serve before the tree starts
    redact: Callable[[str], str] = attrs.field(default=str, repr=False)

    def cwd(self, config: McpServerConfig) -> Path:
        return self.workspace if config.cwd is None else Path(config.cwd).expanduser()

    def child_env(self, config: McpServerConfig) -> dict[str, str]:
        return {**self.policy.child_env(os.environ), **self._named(config.env, "env")}

    def headers(self, config: McpServerConfig) -> dict[str, str]:
        values = self._named(config.headers.values(), "headers")
        headers = {h: values[v] for h, v in config.headers.items()}
        if config.bearer_env:
            token = self._named([config.bearer_env], "bearer_env")[config.bearer_env]
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _named(self, names: Iterable[str], key: str) -> dict[str, str]:
        found = {}
        for name in names:
            value = self.secrets.get(name)
            if value is None:
                raise ServerEnded(f"{key}: the variable {name} is not set")
            found[name] = value
        return found
