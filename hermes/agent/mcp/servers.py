"""Every configured MCP server, their tools as the model is offered them, and the `mcp`
node of the serve tree that runs them.

The tree node is a supervisor with one supervisor per server (each restarts its
own server with its own backoff, for ever: one server's trouble never touches the
others or serve). What the servers offer is kept here, shared with the agent:
the last tool list a server gave stays offered while it restarts (a call then
says the server is not running), so a model mid-conversation does not see tools
come and go. `reload` applies a re-read `mcp` section: servers whose settings
changed restart, removed ones stop, new ones start.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import math
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from hermes.actors.backoff import Backoff
from hermes.actors.link import CONNECTING, LinkStatus
from hermes.actors.supervisor import ChildSpec, Strategy, Supervisor
from hermes.agent.mcp.settings import McpConfig, McpServerConfig
from hermes.agent.mcp.setup import START_TIMEOUT, McpSetup
from hermes.agent.permissions import granted
from hermes.agent.tools.base import schema
from hermes.config import Role

if TYPE_CHECKING:  # the SDK is imported once a server starts, not with hermes
    from mcp import types

    from hermes.agent.mcp.link import ServerLink
    from hermes.agent.mcp.server import McpServer
    from hermes.agent.mcp.tool import McpTool

log = logging.getLogger(__name__)

SERVER_BACKOFF = Backoff(minimum=1.0, maximum=60.0)  # after a bug: the actor is made again
SHUTDOWN = 10.0  # seconds a server's actor gets to stop (its tree is killed meanwhile)
SERVER_SCHEMAS = 60_000  # characters of one server's tool schemas offered in each prompt


@attrs.define(eq=False)
class _Server:
    name: str
    config: McpServerConfig
    status: LinkStatus = attrs.Factory(LinkStatus)
    link: ServerLink | None = None
    tools: dict[str, McpTool] = attrs.Factory(dict)  # by offered name: the last listing


class McpServers:
    """The configured servers: their actors' tree node, their tools as offered, reload."""

    def __init__(
        self, config: McpConfig, setup: McpSetup, read_config: Callable[[], McpConfig] | None = None
    ) -> None:
        """`read_config`: how `reload` reads the `mcp` section again (config.yaml)."""
        self.setup = setup
        self.read_config = read_config
        self._servers = {n: _Server(n, c) for n, c in config.servers.items() if c.enabled}
        self._supervisor: Supervisor | None = None
        self._version = 0
        self._offered: dict[Role, tuple[int, list[dict[str, Any]], int]] = {}
        self._reloading = trio.Lock()
        self._published = trio.Event()  # set (and replaced) each time a server publishes

    # -- the tree -------------------------------------------------------------

    def tree(self) -> Supervisor:
        """The serve tree's `mcp` node (a fresh one each time the tree starts it)."""
        self._supervisor = Supervisor(
            "mcp",
            [self._spec(s) for s in self._servers.values()],
            strategy=Strategy.ONE_FOR_ONE,
            max_restarts=math.inf,
            period=600.0,
        )
        return self._supervisor

    @contextlib.asynccontextmanager
    async def running(self, wait: float = START_TIMEOUT) -> AsyncIterator[None]:
        """The servers' node run here for the block, where no serve runs them (`hermes cron
        run`): the block begins once each server came up or failed once (at most `wait`
        seconds), and the node is drained at its end, every server's tree killed. An error
        of the block comes out as itself, not in the group of the node's nursery, so a
        caller's typed error keeps its meaning (its exit status)."""
        try:
            async with trio.open_nursery() as nursery:
                tree: Supervisor = await nursery.start(self.tree().run)
                with trio.move_on_after(wait):
                    await self.until(
                        lambda: all(s.status.state != CONNECTING for s in self._servers.values())
                    )
                try:
                    yield
                finally:
                    tree.drain(trio.current_time() + SHUTDOWN)
        except BaseExceptionGroup as group:
            if len(group.exceptions) != 1:
                raise
            raise group.exceptions[0] from group

    def _spec(self, server: _Server) -> ChildSpec:
        def actor() -> McpServer:
            from hermes.agent.mcp.server import McpServer  # the SDK, when a server starts

            return McpServer(
                server.name,
                server.config,
                self.setup,
                server.status,
                lambda link, tools: self._publish(server, link, tools),
            )

        def own_supervisor() -> Supervisor:
            only = ChildSpec(server.name, actor, shutdown=SHUTDOWN)
            return Supervisor(
                server.name, [only], max_restarts=math.inf, period=600.0, backoff=SERVER_BACKOFF
            )

        return ChildSpec(server.name, own_supervisor, shutdown=SHUTDOWN)

    def _publish(
        self, server: _Server, link: ServerLink | None, tools: list[types.Tool] | None
    ) -> None:
        server.link = link
        self._published.set()
        self._published = trio.Event()
        if tools is None:
            return  # gone: its last tools stay offered; a call says it is not running
        from hermes.agent.mcp.tool import McpTool, fits  # loaded with the server's SDK

        config = server.config
        taken = {n for s in self._servers.values() if s is not server for n in s.tools}
        offered: dict[str, McpTool] = {}
        size = 0
        for tool in tools:
            if not _allowed(tool.name, config.tools) or not fits(tool):
                continue
            made = McpTool.of(
                server.name, tool, config.roles, config.timeout, lambda s=server: s.link
            )
            if made.name in taken or made.name in offered:  # a model refuses a name twice
                log.warning(
                    "MCP server %s: its tool %r is offered as %s, a name already taken; left out",
                    server.name,
                    tool.name,
                    made.name,
                )
                continue
            size += len(str(schema(made)))
            if size > SERVER_SCHEMAS:  # every prompt of its roles carries them all
                log.warning(
                    "MCP server %s: its tools from %s on would take more than %d characters"
                    " of every prompt; left out (narrow them with mcp.servers.%s.tools)",
                    server.name,
                    made.name,
                    SERVER_SCHEMAS,
                    server.name,
                )
                break
            offered[made.name] = made
        server.tools = offered
        self._version += 1

    # -- what the agent reads -------------------------------------------------

    def tool(self, name: str) -> McpTool | None:
        if not name.startswith("mcp_"):
            return None
        for server in self._servers.values():
            if (found := server.tools.get(name)) is not None:
                return found
        return None

    def status(self, name: str) -> LinkStatus:
        return self._servers[name].status

    async def until(self, check: Callable[[], object]) -> None:
        """Until `check()` is true, looked at again each time a server comes, goes or
        lists its tools (what a test waits on, instead of polling)."""
        while not check():
            await self._published.wait()

    def offered(self, role: Role) -> tuple[list[dict[str, Any]], int]:
        """The schemas of the tools `role`'s sessions are offered, and their size."""
        cached = self._offered.get(role)
        if cached is not None and cached[0] == self._version:
            return cached[1], cached[2]
        schemas = [
            schema(t)
            for s in self._servers.values()
            if granted(role, s.config.roles)
            for t in s.tools.values()
        ]
        chars = sum(len(str(s)) for s in schemas)
        self._offered[role] = (self._version, schemas, chars)
        return schemas, chars

    def describe(self, role: Role) -> str:
        """/mcp: each server `role` is offered, its state and its tools; for an owner
        also why a server is down."""
        shown = [s for s in self._servers.values() if granted(role, s.config.roles)]
        if not shown:
            return "No MCP servers are configured for you (mcp.servers in config.yaml)."
        lines = []
        for s in shown:
            why = f" ({s.status.reason})" if s.status.reason and role == "owner" else ""
            kind = "stdio" if s.config.command else "http"
            lines.append(f"{s.name} [{kind}] {s.status.state}{why}")
            if s.tools:
                lines.append("  " + ", ".join(sorted(s.tools)))
        return "\n".join(lines)

    # -- reload ---------------------------------------------------------------

    async def reload(self) -> str:
        """Read the `mcp` section again and apply it; what changed, in one line. A bad
        section (ConfigError) changes nothing. Each server to stop is stopped (its tree
        killed) before its tools go; the chat that asked waits for it."""
        if self.read_config is None or self._supervisor is None:
            return "MCP servers cannot be reloaded here."
        async with self._reloading:
            wanted = {n: c for n, c in self.read_config().servers.items() if c.enabled}
            supervisor = self._supervisor
            stop = [n for n, s in self._servers.items() if wanted.get(n) != s.config]
            start = [n for n, c in wanted.items() if n not in self._servers or n in stop]
            running = set(supervisor.child_names())
            for name in stop:
                if name in running:
                    await supervisor.stop_child(name)
                server = self._servers.pop(name)  # stopped: its tools go
                if server.link is not None:
                    server.link.close("the server was reloaded")
            self._version += 1
            for name in start:
                server = self._servers[name] = _Server(name, wanted[name])
                await supervisor.start_child(self._spec(server))
        kept = len(self._servers) - len(start)
        return f"MCP servers reloaded: {len(start)} started, {len(stop)} stopped, {kept} unchanged."


def _allowed(tool: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(tool, p) for p in patterns)
