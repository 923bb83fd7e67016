"""`hermes cron run` with no serve runs the MCP servers serve would, for the fire: a
job's turn has the same tools as under serve, and no server process outlives the
command."""

from __future__ import annotations

import pytest
import trio

from hermes.agent.offline import tool_line
from hermes.terminal.tree import ProcessId
from tests.fakes.mcp_server import open_reports, server_command
from tests.processes import hermes
from tests.seed import rows


@pytest.mark.timeout(90)
async def test_a_job_calls_an_mcp_tool_from_cron_run(home):
    async with open_reports() as reports:
        command, *args = server_command("stdio", "echo", reports.address)
        home.config_path.write_text(
            f"mcp:\n  servers:\n    echo:\n      command: {command!r}\n      args: {args!r}\n"
        )
        prompt = tool_line("mcp_echo_echo", text="from the job")
        added = hermes("cron", "add", "every 1h", "--name", "brief", "--prompt", prompt,
                       "--deliver", "local")  # fmt: skip
        assert added.returncode == 0, added.stderr
        ran = await trio.to_thread.run_sync(hermes, "cron", "run", "brief")
        assert ran.returncode == 0, ran.stderr + ran.stdout
        assert "tool: from the job" in ran.stdout  # the tool's answer, not the prompt
        server = ProcessId.of(int((await reports.until("started")).split()[1]))
    assert server is None or not server.alive()  # gone with the command
    (status,) = rows(home.state_db, "SELECT status FROM cron_runs")[0]
    assert status == "ok"
