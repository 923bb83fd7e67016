"""`mcp.servers.<name>.tools` narrows what a server offers: with `tools: ["read_*", "grow"]`
the model is offered only the server's tools those names and globs match, a tool the
server adds later only if it matches too, and a call of one left out is refused as a
tool that does not exist: it never reaches the server. A real MCP server (tests/fakes/
mcp_server.py) run by hermes's MCP actors, called from turns through the router."""

from __future__ import annotations

from hermes.agent.loop import Agent
from hermes.agent.offline import tool_line
from tests.gateway.router_harness import running_router
from tests.gateway.test_mcp_turns import CONFIG, agent_with, running_servers, stdio, tool_rows


def offered(agent: Agent) -> list[str]:
    return sorted(name for name in agent.offered("owner") if name.startswith("mcp_"))


async def test_only_the_tools_a_server_is_configured_with_are_offered_and_called(
    registry, home, fake
):
    async with running_servers(home, echo=stdio(tools=("read_*", "grow"))) as mcp:
        agent = agent_with(mcp)
        assert offered(agent) == ["mcp_echo_grow"]  # not echo, slow, die, picture ...
        async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
            await h.ask("alice", '/tool mcp_echo_grow {"name": "write_notes"}')
            await h.ask("alice", '/tool mcp_echo_grow {"name": "read_notes"}')
            await mcp.until(lambda: mcp.tool("mcp_echo_read_notes") is not None)
            grown = offered(agent)  # listed with write_notes, which is left out
            read = await h.ask("alice", tool_line("mcp_echo_read_notes", text="the notes"))
            refused = await h.ask("alice", tool_line("mcp_echo_echo", text="let me"))
            written = await h.ask("alice", tool_line("mcp_echo_write_notes", text="let me"))
    assert grown == ["mcp_echo_grow", "mcp_echo_read_notes"]
    assert "the notes" in read.text
    assert "there is no tool 'mcp_echo_echo'" in refused.text and "let me" not in refused.text
    assert "there is no tool 'mcp_echo_write_notes'" in written.text
    assert tool_rows(home, "mcp_echo_echo") == ["error: there is no tool 'mcp_echo_echo'"]
    assert tool_rows(home, "mcp_echo_read_notes") == ["the notes"]
