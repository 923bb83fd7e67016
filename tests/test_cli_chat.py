"""`hermes chat` as a REPL, against a real serve: what serve pushes while the user has
not typed anything (a cron brief) is printed at once, not with the next answer."""

from __future__ import annotations

import subprocess

import pytest

from hermes.agent.offline import tool_line
from tests.processes import HERMES, wait_ready


def read_until(stream, text: str) -> list[str]:
    """Lines from `stream` up to the one holding `text` (pytest-timeout bounds the wait)."""
    lines = []
    for line in iter(stream.readline, ""):
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the stream ended before {text!r}: {lines}")


@pytest.mark.timeout(90)
def test_an_idle_repl_prints_a_brief_as_it_comes(home, spawn):
    wait_ready(spawn())
    repl = subprocess.Popen([*HERMES, "chat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
    try:
        job = tool_line("cronjob", action="create", schedule="in 2s", prompt="the brief")
        repl.stdin.write(job + "\n")
        repl.stdin.flush()
        read_until(repl.stderr, "(session ")  # answered: the REPL waits for the next line
        brief = read_until(repl.stdout, "[cron] ")
        assert brief[-1].strip() == "[cron] You said: the brief"  # nothing typed since
    finally:
        repl.stdin.close()
        assert repl.wait(timeout=30) == 0
