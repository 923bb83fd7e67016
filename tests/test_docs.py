"""The docs name what the code has: every platform of the registry in the README's first
paragraph and in docs/architecture.md's layer table, every tool of the catalog in the
tool tables of docs/agent.md and docs/access.md, every chat command of the command table
in the docs' command tables, every `hermes` command in the README's list. A platform, a
tool or a command added without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hermes.adapters.homeassistant.config import HomeAssistantConfig
from hermes.adapters.media import MAX_FILE
from hermes.adapters.registry import PLATFORMS
from hermes.agent.browser.browsers import Browsers
from hermes.agent.browser.settings import BrowserConfig
from hermes.agent.tools.browser import browser_tools
from hermes.agent.tools.catalog import default_tools, web_tools
from hermes.agent.tools.homeassistant import homeassistant_tools
from hermes.agent.web.settings import SearchConfig, WebConfig
from hermes.cli.main import COMMANDS
from hermes.config import Secrets
from hermes.gateway.command_table import BY_WORD
from hermes.terminal.addresses import AllowList

ROOT = Path(__file__).parents[1]
SPOKEN = {
    "local": "local endpoint",
    "homeassistant": "Home Assistant",
}  # how prose names a platform, where not by its name


def first_paragraph(path: Path) -> str:
    """The first paragraph of prose (after the title and the set-up commands)."""
    paragraphs = path.read_text().split("\n\n")
    return next(p for p in paragraphs if p and not p.startswith(("#", "    ")))


def table_rows(path: Path, heading: str) -> str:
    """The rows of the first table under `heading`."""
    text = path.read_text()
    section = text[text.index(heading) :]
    table = re.search(r"(?m)^\|.*\|\n\|[-| ]+\|\n(?:\|.*\|\n)+", section)
    assert table is not None, f"no table under {heading} in {path.name}"
    return table.group(0)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_the_readme_and_the_architecture_name_every_platform(platform):
    said = SPOKEN.get(platform, platform)
    assert said.lower() in first_paragraph(ROOT / "README.md").lower()
    layers = table_rows(ROOT / "docs/architecture.md", "## The layers")
    assert f"`{platform}`" in layers


def every_tool() -> list[str]:
    search = WebConfig(search=SearchConfig(provider="searxng", url="http://127.0.0.1:1"))
    browsing = browser_tools(Browsers(BrowserConfig(), AllowList(), MAX_FILE), multimodal=False)
    home = homeassistant_tools(HomeAssistantConfig(), Secrets({}, frozenset()))
    return sorted(default_tools() | web_tools(search, Secrets({}, frozenset())) | browsing | home)


@pytest.mark.parametrize("tool", every_tool())
def test_the_tool_tables_name_every_tool(tool):
    assert f"`{tool}`" in table_rows(ROOT / "docs/agent.md", "## Tools")
    assert f"`{tool}`" in table_rows(ROOT / "docs/access.md", "## Which tools each role may call")


def test_the_chat_command_tables_name_every_command_and_no_other():
    """docs/agent.md's table of chat commands (with conversation.md's for the flow ones)
    against the one command table."""
    rows = table_rows(ROOT / "docs/agent.md", "## Conversations")
    rows += table_rows(ROOT / "docs/conversation.md", "/busy")
    named = set(re.findall(r"`(/[a-z-]+)", rows))
    assert named == set(BY_WORD)


def test_the_readme_lists_every_cli_command_and_no_other():
    section = (ROOT / "README.md").read_text().split("## Commands\n", 1)[1]
    block = re.search(r"(?m)(?:^    hermes .*\n)+", section)
    assert block is not None
    listed = {line.split()[1] for line in block.group(0).splitlines()}
    assert listed == {name for name, _, _ in COMMANDS}
