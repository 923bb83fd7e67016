"""MCP servers in `hermes serve` as a real process: a slow call stopped from the chat is
cancelled on the server, /mcp shows the servers, /reload-mcp applies a changed config,
and after serve stops no process of a server's tree is left (the orphan check)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import trio

from hermes.actors.link import LIVE
from hermes.actors.snapshot import Snapshot
from hermes.agent.offline import tool_line
from hermes.terminal.tree import ProcessId
from tests.adapters.serving import Serve, in_thread, serving
from tests.fakes.mcp_server import Reports, open_reports, server_command


async def until_ready(serve: Serve, name: str, timeout: float = 30.0) -> None:
    """Until serve's status shows the MCP server `name` ready (it lists its tools after
    serve is ready, and tells nobody outside: polled, as `until_mirrored` polls)."""
    deadline = trio.current_time() + timeout
    while True:
        tree = Snapshot.from_dict((await serve.rpc("status", {}))["result"])
        node = next(c for c in tree.children if c.name == "mcp")
        states = [a.detail.get("mcp") for s in node.children if s.name == name for a in s.children]
        if states == [LIVE]:
            return
        assert trio.current_time() < deadline, f"MCP server {name} never became ready: {states}"
        await trio.sleep(0.05)


def mcp_section(report: str, *names: str) -> str:
    lines = "mcp:\n  servers:\n"
    for name in names:
        command, *args = server_command("stdio", name, report)
        lines += f"    {name}:\n      command: {command!r}\n      args: {args!r}\n"
    return lines


@contextlib.asynccontextmanager
async def serving_echo(home, fake) -> AsyncIterator[tuple[Serve, Reports]]:
    """serve with the MCP server `echo`, ready, reporting to the test."""
    async with open_reports() as reports:
        with serving(Serve, None, home, fake) as serve:
            serve.configure(model="", top=mcp_section(reports.address, "echo"))
            await in_thread(serve.start)
            await until_ready(serve, "echo")
            yield serve, reports


@pytest.mark.timeout(90)
async def test_stop_cancels_an_mcp_call_and_no_process_outlives_serve(home, fake):
    async with serving_echo(home, fake) as (serve, reports):
        first = await serve.rpc("chat.send", {"text": tool_line("mcp_echo_spawn_child")})
        session = first["result"]["session"]
        child = ProcessId.of(int((await reports.until("child")).split()[1]))
        server = ProcessId.of(int((await reports.until("started")).split()[1]))
        assert child is not None and server is not None

        listed = await serve.rpc("chat.send", {"text": "/mcp", "session": session})
        assert "echo [stdio] live" in listed["result"]["text"]
        assert "mcp_echo_slow" in listed["result"]["text"]

        answers = []

        async def ask_slow() -> None:
            slow = tool_line("mcp_echo_slow", seconds=60)
            answers.append(await serve.rpc("chat.send", {"text": slow, "session": session}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_slow)
            await reports.until("slow started")
            stop = await serve.rpc("chat.send", {"text": "/stop", "session": session})
            assert stop["result"]["text"] == "Stopped the running turn."
            await reports.until("cancelled")  # the server saw notifications/cancelled
        assert not [line for line in reports.lines if line == "slow done"]
        assert [a["result"]["status"] for a in answers] == ["interrupted"]

        await in_thread(serve.stop)
        assert not server.alive() and not child.alive()  # the whole tree went with serve


@pytest.mark.timeout(90)
async def test_reload_mcp_starts_new_servers_and_stops_removed_ones(home, fake):
    async with serving_echo(home, fake) as (serve, reports):
        echo = ProcessId.of(int((await reports.until("started")).split()[1]))
        serve.configure(model="", top=mcp_section(reports.address, "other"))
        reloaded = await serve.rpc("chat.send", {"text": "/reload-mcp"})
        assert reloaded["result"]["text"] == (
            "MCP servers reloaded: 1 started, 1 stopped, 0 unchanged."
        )
        await until_ready(serve, "other")
        assert echo is not None and not echo.alive()  # its tree went with its actor
        answer = await serve.rpc("chat.send", {"text": tool_line("mcp_other_echo", text="hi")})
        assert "hi" in answer["result"]["text"]
        serve.configure(model="", top="mcp:\n  servers:\n    bad: {}\n")
        refused = await serve.rpc("chat.send", {"text": "/reload-mcp"})
        assert refused["result"]["text"].startswith("Nothing changed:")
        assert "mcp.servers['bad'].command" in refused["result"]["text"]
        await in_thread(serve.stop)
