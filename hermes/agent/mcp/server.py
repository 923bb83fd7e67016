"""One MCP server as an actor: its transport and SDK session for the actor's life.

The actor reports ready at once and connects in the background, so a slow or
broken server never holds up serve. When the server goes away (its process
exits, its endpoint fails, a ping goes unanswered) the actor connects again, paced
as every link is (hermes.actors.link): at once after a session that was up, after
LINK_BACKOFF's growing wait after one that failed to come up; a server that keeps
failing shows as down in `hermes status` and /ready without making serve unready.
Its supervisor restarts it only after a bug. Stopping the actor kills a stdio
server's whole process tree.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import trio
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError

from hermes.actors.actor import Actor
from hermes.actors.link import (
    BACKING_OFF,
    CONNECTING,
    DOWN,
    LINK_BACKOFF,
    LIVE,
    STOPPED,
    LinkStatus,
)
from hermes.agent.mcp.link import ServerLink
from hermes.agent.mcp.settings import McpServerConfig
from hermes.agent.mcp.setup import START_TIMEOUT, McpSetup, ServerEnded
from hermes.agent.mcp.transports import Transport, http_transport, stdio_transport

log = logging.getLogger(__name__)

PING_EVERY = 60.0  # an idle session is asked whether it is alive this often
PING_TIMEOUT = 20.0
MAX_TOOLS = 500  # tools taken from one server
MAX_PAGES = 50  # pages of tools/list followed
CLIENT = types.Implementation(name="hermes", version="0.1.0")


class McpServer(Actor):
    """The server `name` as `config` describes it; `publish(link, tools)` is told each
    time its tool list is read, and `publish(None, None)` each time it goes or fails."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        setup: McpSetup,
        status: LinkStatus,
        publish: Callable[[ServerLink | None, list[types.Tool] | None], None],
    ) -> None:
        super().__init__(name)
        self.config = config
        self.setup = setup
        self.status = status
        self.publish = publish
        self._wake_send, self._wake = trio.open_memory_channel[str](1)
        self._ready = False  # the current session came up

    def detail(self) -> dict[str, Any]:
        return self.status.detail("mcp")

    async def on_start(self) -> None:
        self.nursery.start_soon(self._connections)

    async def flush(self) -> None:
        if self.status.state in (CONNECTING, LIVE):  # not after a failure: keep what it said
            self.status.state, self.status.reason = STOPPED, None

    async def _connections(self) -> None:
        """Sessions one after another for the actor's life: the next at once after one
        that was up, after LINK_BACKOFF's wait (growing with each in a row) after one that
        failed to come up."""
        rng = random.Random()
        while True:
            if self.status.state != DOWN:
                self.status.state = CONNECTING
            self._ready = False
            await self._connection()
            if not self._ready:
                await trio.sleep(LINK_BACKOFF.delay(self.status.early_failures, rng))

    async def _connection(self) -> None:
        """One session, to its end: why it ended goes in the status."""
        try:
            async with self._transport() as transport:
                with trio.CancelScope() as session_scope:  # cancelled when the server goes
                    self.nursery.start_soon(_cancel_when_ended, transport, session_scope)
                    await self._session(transport)
                raise ServerEnded(transport.why or "the server's session ended")
        except Exception as exc:
            why = self.setup.redact(_describe(exc))  # shown in /mcp and /ready
            if self._ready:  # it was up: a fault, tried again at once
                self.status.state, self.status.reason = BACKING_OFF, why
            else:
                self.status.failed_early(why)  # down after a few in a row
            failed = self.status.state == DOWN
            log.warning(
                "MCP server %s: %s%s",
                self.name,
                why,
                f" ({self.status.early_failures} failed starts in a row)" * failed,
                exc_info=None if _expected(exc) else exc,
            )
            self.publish(None, None)  # its state changed: whoever waits on that looks

    async def _session(self, transport: Transport) -> None:
        """Initialize, list the tools, publish them, and keep the session until it is
        cancelled (the server went) or fails."""
        handler = self._on_message(transport)
        async with ClientSession(
            transport.read, transport.write, message_handler=handler, client_info=CLIENT
        ) as session:
            link = ServerLink(self.name, session)
            try:
                with trio.fail_after(START_TIMEOUT):
                    await session.initialize()
                    self.publish(link, await _list_tools(session))
                self._ready = True
                self.status.live()
                self.status.settled()
                log.info("MCP server %s is ready", self.name)
                await self._keep(session, link)
            finally:
                link.close(transport.why or "the server's actor stopped")
                self.publish(None, None)

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Transport]:
        config = self.config
        if config.command is not None:
            cwd, env = self.setup.cwd(config), self.setup.child_env(config)
            async with stdio_transport(config, cwd, env, self.setup.redact) as transport:
                yield transport
        else:
            async with http_transport(config, self.setup.headers(config)) as transport:
                yield transport

    def _on_message(self, transport: Transport) -> Callable[[Any], Any]:
        async def handle(message: Any) -> None:
            """From the session's receive loop: never a request back to the server here
            (its answer would wait on this very loop), only a wake-up for `_keep`."""
            if isinstance(message, Exception):
                transport.end(f"the connection failed: {_describe(message)}")
            elif isinstance(message, types.ServerNotification) and isinstance(
                message.root, types.ToolListChangedNotification
            ):
                self._wake_nowait("tools")

        return handle

    def _wake_nowait(self, why: str) -> None:
        with contextlib.suppress(trio.WouldBlock):  # one wake-up waiting is enough
            self._wake_send.send_nowait(why)

    async def _keep(self, session: ClientSession, link: ServerLink) -> None:
        """For the session's life: read the tools again when the server says they
        changed, and ping it when it has been quiet (a ping unanswered ends it)."""
        while True:
            why = None
            with trio.move_on_after(PING_EVERY):
                why = await self._wake.receive()
            if why == "tools":
                with trio.fail_after(START_TIMEOUT):  # an answer that never comes ends it
                    tools = await _list_tools(session)
                self.publish(link, tools)
                log.info("MCP server %s: its tools changed", self.name)
            elif why is None:
                with trio.move_on_after(PING_TIMEOUT) as timer:
                    await session.send_ping()
                if timer.cancelled_caught:
                    raise ServerEnded(f"no answer to a ping within {PING_TIMEOUT:g} s")


async def _cancel_when_ended(transport: Transport, scope: trio.CancelScope) -> None:
    await transport.ended.wait()
    scope.cancel()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of the server's tools, up to MAX_TOOLS tools or MAX_PAGES pages (a
    server that hands out cursors for ever is not followed for ever)."""
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        tools += page.tools
        cursor = page.nextCursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tools[:MAX_TOOLS]


def _expected(exc: BaseException) -> bool:
    """A server's own trouble (it exited, refused, timed out, answered an error), as
    opposed to a bug here, which is logged with its traceback."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return isinstance(exc, ServerEnded | McpError | OSError | httpx.HTTPError | trio.TooSlowError)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
