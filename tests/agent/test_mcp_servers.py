"""The MCP servers' node on its own: a server that never comes up is tried again with
the links' backoff and shows as down (in /ready under `degraded`, never making serve unready);
a result's content blocks as the model reads them."""

from __future__ import annotations

import base64

import trio
import trio.testing
from mcp import types

from hermes.actors.link import DOWN
from hermes.actors.snapshot import RunState, Snapshot
from hermes.agent.mcp.servers import McpServers
from hermes.agent.mcp.settings import McpConfig, McpServerConfig
from hermes.agent.mcp.setup import McpSetup
from hermes.agent.mcp.tool import offered_name, render
from hermes.agent.tools.base import capped
from hermes.config import Secrets
from hermes.ops.readiness import readiness
from hermes.state.db import Db
from hermes.terminal.command import RunOptions
from hermes.terminal.env import EnvPolicy
from hermes.terminal.session import TerminalSession

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


async def test_a_server_that_never_comes_up_is_down_but_serve_stays_ready(
    autojump_clock, registry, home
):
    servers = {
        "gone": McpServerConfig(command="/nonexistent/mcp-server"),
        "keyless": McpServerConfig(command="true", env=("MCP_KEY_NOT_SET",)),
    }
    setup = McpSetup(Secrets({}, frozenset()), EnvPolicy(), home.workspace)
    mcp = McpServers(McpConfig(servers), setup)
    async with trio.open_nursery() as nursery:
        tree = await nursery.start(mcp.tree().run)
        await mcp.until(lambda: all(mcp.status(n).state == DOWN for n in servers))
        assert "No such file" in mcp.status("gone").reason
        assert mcp.status("keyless").reason == "env: the variable MCP_KEY_NOT_SET is not set"
        assert mcp.status("gone").early_failures >= 3
        await trio.testing.wait_all_tasks_blocked()  # its actor's end ran (a flush keeps it)
        snapshot = Snapshot("serve", "Supervisor", RunState.RUNNING, children=(tree.snapshot(),))
        async with Db(registry, home.state_db) as db:
            ready = await readiness(snapshot, db, 0.0)
        tree.drain(trio.current_time() + 5)
    assert mcp.status("gone").state == DOWN  # a stop after a failure keeps what it said
    assert ready.body["mcp"]["gone"]["state"] == DOWN
    assert ready.body["mcp"]["gone"]["restarts"] == 0  # its actor paced its own attempts
    assert "MCP server gone is down: " in ready.body["degraded"][0]
    assert ready.ready and ready.body["problems"] == []


def test_a_results_blocks_as_text_binary_saved_to_a_file(tmp_path):
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data=PNG, mimeType="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="memo://a", text="the memo"),
            ),
            types.ImageContent(type="image", data="not base64!", mimeType="image/png"),
        ]
    )
    text = render(result, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "first"
    (saved,) = tmp_path.glob("mcp-*.png")
    assert saved.read_bytes() == base64.b64decode(PNG)
    assert lines[1] == f"[image: image/png, {saved.stat().st_size} bytes, saved to {saved}]"
    assert lines[2:4] == ["[resource memo://a]", "the memo"]
    assert lines[4] == "[image: image/png, not valid base64]"
    structured = types.CallToolResult(content=[], structuredContent={"n": 1})
    assert render(structured, tmp_path) == '{"n": 1}'


def test_a_tool_is_offered_under_a_name_every_model_takes():
    assert offered_name("files", "read.file/now") == "mcp_files_read_file_now"
    assert len(offered_name("s", "x" * 100)) == 64


async def test_outside_text_is_capped_and_its_spill_file_holds_no_secret(ctx, tmp_path):
    secret = "sk-live-0123456789abcdef"
    spill = tmp_path / "spill"
    ctx.terminal = TerminalSession(
        tmp_path,
        state_dir=tmp_path / "state",
        policy=EnvPolicy(hidden=(secret,)),
        options=RunOptions(cap=200, spill_dir=spill),
    )
    text = capped(f"the key is {secret}\n" + "x" * 1000, ctx)
    assert len(text) < 400 and "characters cut" in text and secret not in text
    (spilled,) = spill.iterdir()
    whole = spilled.read_text()
    assert secret not in whole and "the key is [REDACTED]" in whole and whole.count("x") == 1000
