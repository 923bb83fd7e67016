"""MCP servers' tools in turns: real servers (tests/fakes/mcp_server.py, written with the
`mcp` SDK) run as processes by hermes's MCP actors, called from turns through the router
with the offline model (`/tool mcp_<server>_<tool> {...}` lines). Real time: the servers
are real processes; every wait is on an event (a report from the server, a tool list
published), bounded by pytest-timeout."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
import trio

from hermes.actors.link import LIVE
from hermes.adapters.settings import PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.mcp import servers
from hermes.agent.mcp.servers import McpServers
from hermes.agent.mcp.settings import McpConfig, McpServerConfig
from hermes.agent.mcp.setup import McpSetup
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.tools.catalog import default_tools
from hermes.config import Secrets
from hermes.gateway.settings import Config
from hermes.terminal.env import EnvPolicy
from hermes.terminal.tree import ProcessId
from tests.fakes.mcp_server import http_server, open_reports, server_command
from tests.gateway.router_harness import running_router
from tests.seed import rows

CONFIG = Config(platforms={"telegram": PlatformConfig(allowed_users=("alice", "bob"),
                                                      owner="alice")})  # fmt: skip


def stdio(report: str | None = None, name: str = "echo", **settings) -> McpServerConfig:
    command, *args = server_command("stdio", name, report)
    return McpServerConfig(command=command, args=tuple(args), **settings)


@contextlib.contextmanager
def server_of(transport: str, report: str | None = None) -> Iterator[McpServerConfig]:
    """The echo server over `transport`: hermes runs it (stdio), or it runs beside
    (HTTP) for the block's life."""
    if transport == "stdio":
        yield stdio(report)
    else:
        with http_server(report=report) as server:
            yield McpServerConfig(url=server.url)


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@contextlib.asynccontextmanager
async def running_servers(home, **servers: McpServerConfig) -> AsyncIterator[McpServers]:
    """The serve tree's `mcp` node with `servers`, every one ready."""
    setup = McpSetup(Secrets({}, frozenset()), EnvPolicy(), home.workspace)
    mcp = McpServers(McpConfig(servers), setup)
    async with mcp.running():
        assert all(mcp.status(n).state == LIVE for n in servers)
        yield mcp


def agent_with(mcp: McpServers) -> Agent:
    return Agent(ProviderChain([OfflineProvider()]), default_tools(), mcp=mcp)


def tool_rows(home, name: str) -> list[str]:
    return [r[0] for r in rows(home.state_db, "SELECT content FROM messages WHERE role = 'tool'"
                               " AND tool_name = ? ORDER BY id", name)]  # fmt: skip


@TRANSPORTS
async def test_a_turn_calls_a_servers_tool(registry, home, fake, transport):
    with server_of(transport) as config:
        async with running_servers(home, echo=config) as mcp:
            agent = agent_with(mcp)
            assert {"mcp_echo_echo", "mcp_echo_slow", "mcp_echo_grow"} <= set(
                agent.offered("owner")
            )
            async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
                answer = await h.ask("alice", tool_line("mcp_echo_echo", text="hello there"))
                assert "hello there" in answer.text
                document = await h.ask("alice", tool_line("mcp_echo_document"))
                assert "A text resource." in document.text
    assert tool_rows(home, "mcp_echo_echo") == ["hello there"]


async def test_a_server_killed_mid_call_is_restarted_and_the_call_says_so(registry, home, fake):
    async with open_reports() as reports, running_servers(home, echo=stdio(reports.address)) as mcp:
        async with running_router(registry, home, fake, CONFIG, agent=agent_with(mcp)) as h:
            answer = await h.ask("alice", tool_line("mcp_echo_die"))
            await reports.until("dying")
            assert "the MCP server echo stopped during the call" in answer.text
            await reports.until("started", nth=2)  # its actor started it again at once
            await mcp.until(lambda: mcp.status("echo").state == LIVE)
            again = await h.ask("alice", tool_line("mcp_echo_echo", text="back"))
            assert "back" in again.text


async def test_an_http_server_gone_mid_call_ends_the_call_at_once(registry, home, fake):
    """The SDK leaves such a call waiting; hermes sees the answer cut off and ends it."""
    async with open_reports() as reports:
        with http_server(report=reports.address) as server:
            async with running_servers(home, echo=McpServerConfig(url=server.url)) as mcp:
                agent = agent_with(mcp)
                async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
                    with trio.fail_after(30):  # below the call's 60 s timeout
                        answer = await h.ask("alice", tool_line("mcp_echo_die"))
                    assert "the MCP server echo stopped during the call" in answer.text
                    await mcp.until(lambda: mcp.status("echo").state != LIVE)
                    again = await h.ask("alice", tool_line("mcp_echo_echo", text="x"))
                    assert "the MCP server echo is not running now" in again.text


async def test_a_call_past_the_servers_timeout_is_cancelled_on_the_server(registry, home, fake):
    async with open_reports() as reports:
        config = stdio(reports.address, timeout=1.0)
        async with running_servers(home, echo=config) as mcp:
            async with running_router(registry, home, fake, CONFIG, agent=agent_with(mcp)) as h:
                answer = await h.ask("alice", tool_line("mcp_echo_slow", seconds=60))
                assert "gave no answer within 1 s" in answer.text
                assert "mcp.servers.echo.timeout" in answer.text
                await reports.until("cancelled")  # notifications/cancelled reached it


@TRANSPORTS
async def test_stop_cancels_a_slow_call_on_the_server(registry, home, fake, transport):
    async with open_reports() as reports:
        with server_of(transport, reports.address) as config:
            async with running_servers(home, echo=config) as mcp:
                await stop_a_slow_call(registry, home, fake, mcp, reports)


async def stop_a_slow_call(registry, home, fake, mcp: McpServers, reports) -> None:
    async with running_router(registry, home, fake, CONFIG, agent=agent_with(mcp)) as h:
        slow = await h.send("alice", tool_line("mcp_echo_slow", seconds=60))
        await reports.until("slow started")
        assert (await h.ask("alice", "/stop")).text == "Stopped the running turn."
        assert (await h.final(slow)).kind == "interrupted"
        await reports.until("cancelled")  # notifications/cancelled, not a closed connection
        assert not [line for line in reports.lines if line.startswith("slow done")]


@TRANSPORTS
async def test_a_changed_tool_list_is_offered_at_once(registry, home, fake, transport):
    with server_of(transport) as config:
        async with running_servers(home, echo=config) as mcp:
            await grow_a_tool(registry, home, fake, mcp)


async def grow_a_tool(registry, home, fake, mcp: McpServers) -> None:
    agent = agent_with(mcp)
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        assert "mcp_echo_extra" not in agent.offered("owner")
        await h.ask("alice", tool_line("mcp_echo_grow", name="extra"))
        await mcp.until(lambda: mcp.tool("mcp_echo_extra") is not None)
        assert "mcp_echo_extra" in agent.offered("owner")
        answer = await h.ask("alice", tool_line("mcp_echo_extra", text="grown"))
        assert "grown" in answer.text


async def test_a_user_is_not_offered_an_owners_server(registry, home, fake):
    shared = stdio(name="shared", roles=("owner", "user"))
    async with running_servers(home, echo=stdio(), shared=shared) as mcp:
        agent = agent_with(mcp)
        user_tools = agent.offered("user")
        assert not [t for t in user_tools if t.startswith("mcp_echo_")]
        assert "mcp_shared_echo" in user_tools
        assert "mcp_echo_echo" in agent.offered("owner")
        async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
            refused = await h.ask("bob", tool_line("mcp_echo_echo", text="let me"))
            assert "not available to a user here (its MCP server's roles)" in refused.text
            allowed = await h.ask("bob", tool_line("mcp_shared_echo", text="shared"))
            assert "shared" in allowed.text
            listed = (await h.ask("bob", "/mcp")).text
            assert listed.startswith("shared [stdio] live") and "echo [stdio]" not in listed
            assert "echo [stdio] live" in (await h.ask("alice", "/mcp")).text
    refusal = "error: the mcp_echo_echo tool is not available to a user here"
    assert tool_rows(home, "mcp_echo_echo") == [f"{refusal} (its MCP server's roles)"]


async def test_a_stopped_servers_tree_is_gone(registry, home, fake):
    async with open_reports() as reports:
        async with running_servers(home, echo=stdio(reports.address)) as mcp:
            async with running_router(registry, home, fake, CONFIG, agent=agent_with(mcp)) as h:
                await h.ask("alice", tool_line("mcp_echo_spawn_child"))
            server = ProcessId.of(int((await reports.until("started")).split()[1]))
            child = ProcessId.of(int((await reports.until("child")).split()[1]))
            assert server is not None and child is not None
        assert not server.alive() and not child.alive()


async def test_a_tool_name_another_server_offers_already_is_left_out(registry, home, fake):
    """Server `echo_spawn`'s tool `child` would be offered as `mcp_echo_spawn_child`, the
    name of server `echo`'s `spawn_child`: a model refuses a tool list naming one twice."""
    async with running_servers(home, echo=stdio(), echo_spawn=stdio(name="echo_spawn")) as mcp:
        agent = agent_with(mcp)
        async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
            await h.ask("alice", '/tool mcp_echo_spawn_grow {"name": "child"}')
            await h.ask("alice", '/tool mcp_echo_spawn_grow {"name": "other"}')
            await mcp.until(lambda: mcp.tool("mcp_echo_spawn_other"))  # listed after `child`
        offered = agent.offered("owner")
        assert offered.count("mcp_echo_spawn_child") == 1
        assert mcp.tool("mcp_echo_spawn_child").server == "echo"
        assert "mcp_echo_spawn_echo" in offered  # the rest of its tools are there


async def test_a_servers_tools_take_a_bounded_share_of_every_prompt(home, monkeypatch):
    monkeypatch.setattr(servers, "SERVER_SCHEMAS", 700)  # about two of the fake's tools
    async with running_servers(home, echo=stdio()) as mcp:
        schemas, chars = mcp.offered("owner")
        assert 1 <= len(schemas) < 7 and chars <= 700
