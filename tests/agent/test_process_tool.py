"""The process tool: text written to a background shell is judged and placed as a command
is, and a user reaches only their own session's processes."""

from __future__ import annotations

import json
import os

import attrs
import pytest

from hermes.agent.permissions import Caller
from hermes.agent.tools.base import ToolError
from hermes.agent.tools.process import ProcessTool
from hermes.agent.tools.terminal import TerminalTool
from hermes.agent.untrusted import TurnMarks
from hermes.terminal.background import Log, ProcessError
from hermes.terminal.placement import backends_for
from hermes.terminal.session import TerminalSession
from hermes.terminal.settings import TerminalConfig


@pytest.fixture
def shell_ctx(ctx, procs, home, require_system):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    backends = backends_for(TerminalConfig(), home.root)
    terminal = TerminalSession(home.workspace, state_dir=home.root / ".term", backends=backends)
    return attrs.evolve(ctx, terminal=terminal, background=procs)


async def started(ctx, command: str) -> str:
    answer = json.loads(await TerminalTool()({"command": command, "background": True}, ctx))
    return answer["started"]


async def test_a_turn_that_read_untrusted_text_writes_to_no_unconfined_shell(shell_ctx, procs):
    host_shell = await started(shell_ctx, "cat")  # an owner's, on this machine
    untrusted = attrs.evolve(shell_ctx, marks=TurnMarks("web_fetch of example.org"))
    with pytest.raises(ToolError, match="runs unconfined \\(host\\) and this turn's commands"):
        await ProcessTool()({"action": "write", "id": host_shell, "data": "id\n"}, untrusted)
    sandboxed = await started(untrusted, "cat")  # this one starts in the sandbox
    wrote = await ProcessTool()({"action": "write", "id": sandboxed, "data": "hi\n"}, untrusted)
    assert json.loads(wrote) == {"written": 3}
    assert (await procs.call(Log(host_shell)))["text"] == ""  # nothing reached the host shell


async def test_a_blocked_line_is_never_written(shell_ctx, procs):
    shell = await started(shell_ctx, "cat")
    with pytest.raises(ToolError, match="blocked: a fork bomb"):
        await ProcessTool()({"action": "write", "id": shell, "data": ":(){ :|:& };:\n"},
                            shell_ctx)  # fmt: skip
    assert (await procs.call(Log(shell)))["text"] == ""


async def test_a_user_reaches_only_the_processes_they_started(shell_ctx):
    owners = await started(shell_ctx, "sleep 300")
    bob = Caller("telegram", "bob", "user")
    elsewhere = attrs.evolve(shell_ctx, session_id="s2", caller=bob)
    shared = attrs.evolve(shell_ctx, caller=bob)  # the owner's conversation, shared
    for user in (elsewhere, shared):
        for action in ("poll", "kill", "write"):
            with pytest.raises(ToolError, match="no background process"):
                await ProcessTool()({"action": action, "id": owners, "data": "x"}, user)
        assert json.loads(await ProcessTool()({"action": "list"}, user)) == []
    his = await started(shared, "sleep 300")  # sandboxed, his
    listed = json.loads(await ProcessTool()({"action": "list"}, shared))
    assert [p["id"] for p in listed] == [his] and listed[0]["ran_in"] == "sandbox"


async def test_a_refused_background_start_holds_nothing_open(shell_ctx):
    user = attrs.evolve(shell_ctx, caller=Caller("telegram", "bob", "user"))  # sandboxed
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(ProcessError, match="blocked"):
            await TerminalTool()({"command": "rm -rf /", "background": True}, user)
    assert len(os.listdir("/proc/self/fd")) == before
