"""A `hermes` command loads what it uses: `--help` nothing but the command table and its
exit statuses, `cron list` on an empty home nothing but its arguments, and on a home
serve ran in no platform's package and not the agent (a script that calls the CLI in a
loop pays each import every time)."""

from __future__ import annotations

import json
import subprocess
import sys

from hermes.adapters.registry import NAMES

LOADED = """
import json, sys
from hermes.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("hermes"))), file=sys.stderr)
"""


def loaded(tmp_path, *argv: str) -> list[str]:
    env = {"HERMES_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True,
                          text=True, env=env, timeout=60)  # fmt: skip
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_loads_only_the_command_table(tmp_path):
    assert loaded(tmp_path, "--help") == [
        "hermes", "hermes.actors", "hermes.actors.errors", "hermes.cli", "hermes.cli.exit_codes",
        "hermes.cli.main",
    ]  # fmt: skip


def test_cron_list_on_an_empty_home_loads_only_its_arguments(tmp_path):
    """No state.db: nothing to show, so nothing is loaded to show it (no config, no
    platform, no trio)."""
    assert loaded(tmp_path, "cron", "list") == [
        "hermes", "hermes.actors", "hermes.actors.errors", "hermes.cli", "hermes.cli.cron_cmd",
        "hermes.cli.exit_codes", "hermes.cli.main", "hermes.home",
    ]  # fmt: skip


def test_cron_list_loads_no_platform_and_no_agent(tmp_path):
    (tmp_path / "state.db").write_bytes(b"")  # a home serve ran in (an empty database)
    modules = loaded(tmp_path, "cron", "list")
    assert "hermes.cli.cron_actions" in modules
    platforms = [m for m in modules if m.split(".")[:3][-1] in NAMES and ".adapters." in m]
    assert platforms == []
    heavy = ("hermes.agent.loop", "hermes.agent.tools", "hermes.gateway.tree", "hermes.ops")
    assert [m for m in modules if m.startswith(heavy)] == []
