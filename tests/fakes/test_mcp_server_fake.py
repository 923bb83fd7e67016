"""Self-tests of the MCP server fake (tests/fakes/mcp_server.py), driven by the `mcp`
SDK's own client over both transports, the way hermes's client will drive it."""

from __future__ import annotations

import base64
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psutil
import pytest
import trio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

from tests.fakes.mcp_server import (
    DOCUMENT_TEXT,
    PICTURE_PNG,
    Reports,
    http_server,
    open_reports,
    server_command,
)

TOOLS = {"echo", "slow", "grow", "spawn_child", "die", "picture", "document"}
BOUND = 15  # seconds any one test may take: a hang fails, it does not stall the suite

MessageHandler = Callable[[Any], Awaitable[None]]


async def ignore(message: Any) -> None:
    """The client's handler for what the server sends unasked, when a test needs none."""


@asynccontextmanager
async def connect(
    transport: str, reports: Reports, on_message: MessageHandler = ignore
) -> AsyncIterator[ClientSession]:
    """An initialized client session with a new server over `transport`."""
    if transport == "stdio":
        command = server_command("stdio", report=reports.address)
        params = StdioServerParameters(command=command[0], args=command[1:])
        # Its stderr goes to the test's: shown when the test fails.
        async with (
            stdio_client(params, errlog=sys.stderr) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            await session.initialize()
            yield session
    else:
        with http_server(report=reports.address) as server:
            async with (
                streamable_http_client(server.url) as (read, write, _),
                ClientSession(read, write, message_handler=on_message) as session,
            ):
                await session.initialize()
                yield session


def text_of(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent), block
    return block.text


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tools_and_their_results(transport: str) -> None:
    with trio.fail_after(BOUND):
        async with open_reports() as reports, connect(transport, reports) as session:
            server_pid = int((await reports.until("started")).split()[1])
            listed = await session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            echo = next(tool for tool in listed.tools if tool.name == "echo")
            assert echo.inputSchema["required"] == ["text"]

            assert text_of(await session.call_tool("echo", {"text": "héllo"})) == "héllo"

            [image] = (await session.call_tool("picture", {})).content
            assert isinstance(image, types.ImageContent)
            assert image.mimeType == "image/png"
            assert base64.b64decode(image.data) == PICTURE_PNG

            [embedded] = (await session.call_tool("document", {})).content
            assert isinstance(embedded, types.EmbeddedResource)
            assert isinstance(embedded.resource, types.TextResourceContents)
            assert embedded.resource.text == DOCUMENT_TEXT

            child = int(text_of(await session.call_tool("spawn_child", {})))
            try:
                assert await reports.until("child") == f"child {child}"
                assert psutil.Process(child).ppid() == server_pid
                assert psutil.Process(child).name() == "sleep"
            finally:
                os.kill(child, signal.SIGKILL)  # the stdio server leaves it behind


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_grow_adds_a_tool_and_says_so(transport: str) -> None:
    changed = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changed.set()

    with trio.fail_after(BOUND):
        async with (
            open_reports() as reports,
            connect(transport, reports, on_message) as session,
        ):
            assert text_of(await session.call_tool("grow", {"name": "shout"})) == "added shout"
            await changed.wait()
            assert await reports.until("grew") == "grew shout"
            listed = await session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS | {"shout"}
            assert text_of(await session.call_tool("shout", {"text": "hey"})) == "hey"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancelled_notification_cancels_slow(transport: str) -> None:
    errors: list[McpError] = []

    with trio.fail_after(BOUND):
        async with open_reports() as reports, connect(transport, reports) as session:

            async def call_slow() -> None:
                with pytest.raises(McpError) as raised:
                    await session.call_tool("slow", {"seconds": 60})
                errors.append(raised.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call_slow)
                request_id = int((await reports.until("slow started")).split()[2])
                params = types.CancelledNotificationParams(requestId=request_id, reason="test")
                await session.send_notification(
                    types.ClientNotification(types.CancelledNotification(params=params))
                )
                await reports.until("cancelled")
            [error] = errors
            assert error.error.message == "Request cancelled"
            # The server lives on.
            assert text_of(await session.call_tool("echo", {"text": "still"})) == "still"
            assert "slow done" not in reports.lines
            assert "aborted" not in reports.lines


async def test_a_stdio_client_gone_mid_call_aborts_slow() -> None:
    """No notifications/cancelled, only stdin closed: the server tells `aborted`."""
    with trio.fail_after(BOUND):
        async with open_reports() as reports:
            async with connect("stdio", reports) as session:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.call_tool, "slow", {"seconds": 60})
                    await reports.until("slow started")
                    nursery.cancel_scope.cancel()
            await reports.until("aborted")
            assert "cancelled" not in reports.lines


async def test_die_over_stdio_ends_the_call_with_an_error() -> None:
    with trio.fail_after(BOUND):
        async with open_reports() as reports, connect("stdio", reports) as session:
            with pytest.raises(McpError, match="Connection closed"):
                await session.call_tool("die", {})
            assert "dying" in reports.lines


async def test_die_over_http_ends_the_server() -> None:
    """The process is gone with status 1 after reporting. (The SDK's own HTTP client
    does not end the pending call then: it is cancelled here.)"""
    with trio.fail_after(BOUND):
        async with open_reports() as reports:
            with http_server(report=reports.address) as server:
                async with (
                    streamable_http_client(server.url) as (read, write, _),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(session.call_tool, "die", {})
                        await reports.until("dying")
                        assert await trio.to_thread.run_sync(server.proc.wait) == 1
                        nursery.cancel_scope.cancel()
