"""Running the `hermes` command the way a user does: as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

from hermes.gateway.serve import READY_LINE

HERMES = [sys.executable, "-m", "hermes.cli.main"]


def hermes(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one command to its end; HERMES_HOME comes from the environment (`env`: variables
    set beside it)."""
    environ = {**os.environ, **env} if env else None
    return subprocess.run([*HERMES, *args], capture_output=True, text=True, timeout=timeout,
                          env=environ)  # fmt: skip


def start_serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*HERMES, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_ready(proc: subprocess.Popen[str]) -> int:
    """The port from the ready line (blocks until serve prints it; pytest-timeout guards)."""
    line = proc.stdout.readline()
    assert line.startswith(READY_LINE + " port="), (line, proc.poll())
    return int(line.split("port=")[1])
