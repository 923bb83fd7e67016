"""docs/configuration.md is `hermes config reference`'s output, and what it says is true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import yaml

from hermes.adapters.homeassistant.config import Subscription
from hermes.adapters.registry import SECTIONS, chat_platforms
from hermes.adapters.webhook.config import WebhookRoute
from hermes.agent.mcp.settings import McpServerConfig
from hermes.cli.config_reference import EACH_OF_A_PLATFORM, REGENERATE, MissingHelp, keys_of
from hermes.config import load_config
from hermes.gateway.settings import Config

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
ROW = re.compile(r"^\| `([^`]+)` \| [^|]+ \| `([^`]*)` \|", re.MULTILINE)


def test_the_doc_is_the_commands_output(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "HERMES_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "hermes.cli.main", "config", "reference"],
        capture_output=True, text=True, env=env, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == DOC.read_text(), f"docs/configuration.md is out of date: {REGENERATE}"
    assert not home.exists()  # it reads the classes, not a home


def test_every_key_written_with_its_default_reads_back_as_the_default(tmp_path: Path) -> None:
    """Each row of the doc, written into config.yaml as the doc shows it (`<name>` as each
    platform), is a key the strict loader knows, and its default is the code's."""
    rows = ROW.findall(DOC.read_text())
    assert len(rows) > 40
    # An MCP server has no all-defaults form (it needs a command or a url), nor has an
    # inbound webhook's route or a Home Assistant subscription (a prompt, a target): their
    # rows are checked by their own tests, not written here.
    servers = [path for path, _ in rows if path.startswith("mcp.servers.<name>.")]
    assert len(servers) == len(attrs.fields(McpServerConfig))
    routes = [path for path, _ in rows if f".{EACH_OF_A_PLATFORM}." in path]
    assert len(routes) == len(attrs.fields(WebhookRoute)) + len(attrs.fields(Subscription))
    data: dict = {}
    for path, default in rows:
        if path in servers or path in routes:
            continue
        names = chat_platforms() if "<name>" in path else [None]
        for name in names:
            *parents, leaf = path.replace("<name>", name or "").split(".")
            node = data
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = yaml.safe_load(default)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(data))
    expected = Config(platforms={name: SECTIONS[name]() for name in chat_platforms()})
    assert load_config(config_file, Config, SECTIONS) == expected
    assert set(data["platforms"]) == set(chat_platforms())


@attrs.frozen
class Half:
    said: int = 1
    """This one says what it means."""
    unsaid: int = 2


def test_a_key_without_a_docstring_is_named() -> None:
    with pytest.raises(MissingHelp, match=r"Half\.unsaid \(half\.unsaid\) has no docstring"):
        keys_of(Half, "half.")
