"""The README's "First run", as a newcomer types it: its commands, in order, against a
real serve on a fresh home, each printing what the README says it prints.

The commands are read from the README itself, so a changed walkthrough fails here until
this test follows it. Two liberties: serve listens on free ports (a test must not take
9119 from a serve the machine runs), and the one-shot job is fired with `hermes cron run`
instead of waiting its minute."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from tests.processes import HERMES, hermes, wait_ready

README = Path(__file__).parents[1] / "README.md"


def walkthrough() -> list[list[str]]:
    """The `hermes ...` commands of the First run section's second block, as argv."""
    section = README.read_text().split("## First run", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"(?m)((?:^    .*\n)+)", section)
    commands = []
    for line in blocks[1].splitlines():
        command = line.strip().split("  #", 1)[0].strip()
        if command.startswith("hermes "):
            commands.append(shlex.split(command)[1:])
    return commands


@pytest.mark.timeout(120)
def test_the_first_run_does_what_the_readme_says(home, spawn):
    assert walkthrough() == [
        ["chat", "-m", "hello"],
        ["chat"],
        ["chat", "-m", '/tool terminal {"command": "uptime"}'],
        ["cron", "add", "in 1m", "--prompt", "Stretch your legs", "--deliver", "local"],
        ["cron", "list"],
        ["status"],
    ]
    serve = spawn()
    wait_ready(serve)  # HERMES_BACKEND_READY port=...
    said = hermes("chat", "-m", "hello")
    assert said.returncode == 0 and said.stdout.strip() == "You said: hello"

    repl = subprocess.run(
        [*HERMES, "chat"], input="again\n", capture_output=True, text=True, timeout=60
    )  # fmt: skip  (Ctrl-D: the input ends)
    assert repl.returncode == 0 and "You said: again" in repl.stdout
    assert "(session local_" in repl.stderr  # --session ID continues it

    tool = hermes("chat", "-m", '/tool terminal {"command": "uptime"}')
    assert tool.returncode == 0 and "load average" in tool.stdout

    added = hermes("cron", "add", "in 1m", "--prompt", "Stretch your legs", "--deliver", "local")
    assert added.returncode == 0 and added.stdout.startswith("added ")
    job_id = added.stdout.split()[1]
    assert "Stretch your legs" in hermes("cron", "list").stdout
    assert hermes("cron", "run", job_id).returncode == 0  # instead of its minute
    assert hermes("cron", "list").stdout.strip() == (
        "no cron jobs scheduled or paused; 1 ended (see hermes cron list --all)"
    )
    assert job_id in hermes("cron", "list", "--all").stdout
    assert "1     ok" in hermes("cron", "history", job_id).stdout
    (output,) = list((home.root / "cron" / "output").rglob("*.md"))
    assert "Stretch your legs" in output.read_text()

    status = hermes("status")
    assert status.returncode == 0 and "gateway" in status.stdout and "running" in status.stdout

    serve.send_signal(signal.SIGTERM)  # kill -TERM: it drains and exits 0
    assert serve.wait(timeout=60) == 0
