"""A live session with one MCP server, as the tools that call it see it.

A call runs in the calling turn's task, so cancelling the turn cancels the call;
the server is then told (`notifications/cancelled`), as it is when the call
outlives the server's `timeout`. When the server goes away mid-call (its process
died, its actor stopped) the call ends at once with `ServerGone`, never a hang.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import attrs
import trio
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError

from hermes.agent.tools.base import ToolError

NOTICE_TIMEOUT = 2.0  # seconds a cancellation notice may take to leave


class ServerGone(ToolError):
    """The server stopped during the call, or is not running now."""


@attrs.define(eq=False)
class ServerLink:
    server: str
    session: ClientSession
    gone: str | None = None  # why the session ended; None while it is live
    _calls: set[trio.CancelScope] = attrs.Factory(set)

    def close(self, why: str) -> None:
        """The session is over: every call in flight ends with ServerGone."""
        self.gone = why
        for scope in list(self._calls):
            scope.cancel()

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout: float
    ) -> types.CallToolResult:
        if self.gone is not None:
            raise self._gone()
        # The id call_tool is about to take (the SDK does not hand it out; it is taken
        # before call_tool's first checkpoint, so no other request comes between).
        request_id = self.session._request_id
        scope = trio.CancelScope()
        self._calls.add(scope)
        result = None
        try:
            with scope, trio.move_on_after(timeout):
                result = await self.session.call_tool(tool, arguments)
        except McpError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                raise self._gone(mid_call=True) from None
            raise ToolError(f"the MCP server {self.server} answered: {exc.error.message}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # its streams closed
            raise self._gone(mid_call=True) from None
        except trio.Cancelled:  # the turn was cancelled: the server stops working on it
            await self._tell_cancelled(request_id, "the turn was cancelled")
            raise
        finally:
            self._calls.discard(scope)
        if result is not None:
            return result
        if scope.cancelled_caught:
            raise self._gone(mid_call=True)
        await self._tell_cancelled(request_id, f"no answer within {timeout:g} s")
        raise ToolError(
            f"{tool} on the MCP server {self.server} gave no answer within {timeout:g} s"
            f" (mcp.servers.{self.server}.timeout); the call was cancelled"
        )

    def _gone(self, mid_call: bool = False) -> ServerGone:
        why = f" ({self.gone})" if self.gone else ""
        if mid_call:
            return ServerGone(
                f"the MCP server {self.server} stopped during the call{why}; it is being"
                " restarted. The call may or may not have taken effect."
            )
        return ServerGone(f"the MCP server {self.server} is not running{why}")

    async def _tell_cancelled(self, request_id: int, reason: str) -> None:
        notice = types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
        )
        with trio.CancelScope(shield=True), trio.move_on_after(NOTICE_TIMEOUT):
            with contextlib.suppress(Exception):  # gone already: nothing to tell
                await self.session.send_notification(types.ClientNotification(notice))
