"""Who may do what: the one place that decides which tools a role may call.

A tool a role may not call is never offered to the model in that role's
sessions, and a call of it (a model that names it anyway, a `/tool` line) is
refused with one line. What a permitted tool may reach beyond the caller's
own sessions, memory, jobs and chat is for owners only; the tools ask
`Caller.is_owner`. The built-in tools are granted by `agent.tools.<role>`; an MCP
server's tools by the server's `roles` (owners only unless it says).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from hermes.agent.settings import ToolsConfig
from hermes.config import ConfigError, Role

EVERY_TOOL = "*"


@attrs.frozen
class Caller:
    """Who a turn runs for: a user on a platform, with their role there; `person`: the
    accounts it is linked with (`/link`), whose memory it shares."""

    platform: str
    user_id: str
    role: Role
    person: str | None = None

    @property
    def is_owner(self) -> bool:
        return self.role == "owner"

    @property
    def key(self) -> str:
        """Who it is across platforms: `platform:user`."""
        return f"{self.platform}:{self.user_id}"


COMMAND_TOOLS = ("terminal", "process")  # tools that run commands
FILE_TOOLS = ("read_file", "write_file", "patch", "search_files")  # reach what commands see


@attrs.frozen
class Permissions:
    """The tools each role may call, checked against the tools that exist; `withheld`:
    tools a role would be granted but cannot have here, by role, with why (a user's
    commands with no sandbox to run in)."""

    by_role: dict[str, frozenset[str]]
    withheld: dict[str, dict[str, str]] = attrs.Factory(dict)

    @classmethod
    def build(
        cls,
        config: ToolsConfig,
        tools: Iterable[str],
        withheld: dict[str, dict[str, str]] | None = None,
    ) -> Permissions:
        known = frozenset(tools)
        by_role = {}
        for role in ("owner", "user"):
            names = frozenset(getattr(config, role))
            unknown = sorted(names - known - {EVERY_TOOL})
            if unknown:
                raise ConfigError(
                    f"agent.tools.{role}: no tool named {', '.join(map(repr, unknown))}"
                    f" (the tools: {', '.join(sorted(known))}, or {EVERY_TOOL!r} for all)"
                )
            by_role[role] = known if EVERY_TOOL in names else names
        kept = {
            role: {
                t: why for t, why in (withheld or {}).get(role, {}).items() if t in by_role[role]
            }
            for role in by_role
        }
        by_role = {role: names - kept[role].keys() for role, names in by_role.items()}
        return cls(by_role, {role: tools for role, tools in kept.items() if tools})

    def tools_for(self, role: Role) -> frozenset[str]:
        return self.by_role[role]

    def refusal(self, role: Role, tool: str, grants: tuple[Role, ...] | None = None) -> str | None:
        """Why `role` may not call `tool`, in one line; None when it may. `grants`: the
        roles a tool from an MCP server is for (its server's `roles`), which decide it."""
        if grants is not None:
            if granted(role, grants):
                return None
            return f"the {tool} tool is not available to a {role} here (its MCP server's roles)"
        if tool in self.by_role[role]:
            return None
        if (why := self.withheld.get(role, {}).get(tool)) is not None:
            return f"the {tool} tool is not available to a {role} here: {why}"
        return f"the {tool} tool is not available to a {role} here (agent.tools.{role})"


def granted(role: Role, grants: tuple[Role, ...]) -> bool:
    """Whether a tool from an MCP server whose `roles` are `grants` is for `role`: what
    its servers' tools are offered by, and what a call of one is checked against."""
    return role in grants
