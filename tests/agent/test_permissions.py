"""Tool permissions by role: one table, what is offered, what is refused."""

from __future__ import annotations

import pytest

from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.permissions import Caller, Permissions
from hermes.agent.settings import ToolsConfig
from hermes.agent.tools.catalog import default_tools
from hermes.config import ConfigError


def test_the_defaults_give_owners_everything_and_users_the_conversation_tools():
    tools = default_tools()
    permissions = Permissions.build(ToolsConfig(), tools)
    assert permissions.tools_for("owner") == frozenset(tools)
    assert permissions.tools_for("user") == {
        "memory", "session_search", "send_message", "send_file", "skills_list", "skill_view",
        "skill_manage", "read_file", "write_file", "patch", "search_files", "todo",
        "clarify",
    }  # fmt: skip
    assert permissions.refusal("user", "memory") is None
    assert "not available to a user" in permissions.refusal("user", "terminal")


def test_a_tool_that_does_not_exist_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match=r"agent.tools.user: no tool named 'shell'"):
        Permissions.build(ToolsConfig(user=("memory", "shell")), default_tools())


async def test_a_user_is_not_offered_the_shell_and_a_call_of_it_runs_nothing(ctx, tmp_path):
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools())
    assert "terminal" not in agent.offered("user") and "terminal" in agent.offered("owner")
    ran = tmp_path / "ran"
    ctx.caller = Caller("tg", "bob", "user")
    result = await agent.run_turn(ctx, tool_line("terminal", command=f"touch {ran}"))
    assert "the terminal tool is not available to a user" in result.text
    assert not ran.exists()
    ctx.caller = Caller("local", "", "owner")
    await agent.run_turn(ctx, tool_line("terminal", command=f"touch {ran}"))
    assert ran.exists()


async def test_tool_results_are_redacted_before_anyone_sees_them(ctx):
    agent = Agent(ProviderChain([OfflineProvider()]), default_tools(),
                  redact=lambda text: text.replace("hunter2hunter2", "[REDACTED]"))  # fmt: skip
    result = await agent.run_turn(ctx, tool_line("terminal", command="echo hunter2hunter2"))
    assert "[REDACTED]" in result.text and "hunter2hunter2" not in result.text
