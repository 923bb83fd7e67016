"""The tools every agent turn offers, and the web tools config asks for."""

from __future__ import annotations

from hermes.agent.tools.base import Tool
from hermes.agent.tools.clarify import ClarifyTool
from hermes.agent.tools.cronjob import CronjobTool
from hermes.agent.tools.delegate import DelegateTool
from hermes.agent.tools.files import PatchTool, ReadFileTool, SearchFilesTool, WriteFileTool
from hermes.agent.tools.memory import MemoryTool
from hermes.agent.tools.process import ProcessTool
from hermes.agent.tools.send_file import SendFileTool
from hermes.agent.tools.send_message import SendMessageTool
from hermes.agent.tools.session_search import SessionSearchTool
from hermes.agent.tools.skills import SkillManageTool, SkillsListTool, SkillViewTool
from hermes.agent.tools.terminal import TerminalTool
from hermes.agent.tools.todo import TodoTool
from hermes.agent.tools.web_fetch import WebFetchTool
from hermes.agent.tools.web_search import web_search_tool
from hermes.agent.web.settings import WebConfig
from hermes.config import Secrets


def default_tools() -> dict[str, Tool]:
    tools: list[Tool] = [
        TerminalTool(),
        ProcessTool(),
        MemoryTool(),
        CronjobTool(),
        SessionSearchTool(),
        SendMessageTool(),
        SendFileTool(),
        SkillsListTool(),
        SkillViewTool(),
        SkillManageTool(),
        ReadFileTool(),
        WriteFileTool(),
        PatchTool(),
        SearchFilesTool(),
        TodoTool(),
        DelegateTool(),
        ClarifyTool(),
    ]
    return {tool.name: tool for tool in tools}


def web_tools(config: WebConfig, secrets: Secrets) -> dict[str, Tool]:
    """web_fetch (reaching what `allow_private` lists beyond the public web), and
    web_search where a provider is configured. A bad entry or a missing key:
    ConfigError."""
    tools: list[Tool] = [WebFetchTool(allow_private=config.allow_private)]
    search = web_search_tool(config.search, secrets)
    if search is not None:
        tools.append(search)
    return {tool.name: tool for tool in tools}
