"""The tools every agent turn offers."""

from __future__ import annotations

from hermes.agent.tools.base import Tool
from hermes.agent.tools.cronjob import CronjobTool
from hermes.agent.tools.memory import MemoryTool
from hermes.agent.tools.process import ProcessTool
from hermes.agent.tools.send_message import SendMessageTool
from hermes.agent.tools.session_search import SessionSearchTool
from hermes.agent.tools.terminal import TerminalTool


def default_tools() -> dict[str, Tool]:
    tools: list[Tool] = [
        TerminalTool(),
        ProcessTool(),
        MemoryTool(),
        CronjobTool(),
        SessionSearchTool(),
        SendMessageTool(),
    ]
    return {tool.name: tool for tool in tools}
