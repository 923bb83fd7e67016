"""The host backend: a command runs on this machine as serve's own user, unconfined."""

from __future__ import annotations

from pathlib import Path

import attrs

from hermes.terminal.backends.base import Launch, Shell


@attrs.frozen
class Host:
    """bash on this machine, in the command's own directory (the nearest existing one)."""

    name = "host"
    confined = False

    def start_dir(self, workdir: Path) -> str:
        return str(workdir)

    def launch(self, shell: Shell) -> Launch:
        cwd = Path(shell.cwd)
        while not cwd.is_dir() and cwd != cwd.parent:
            cwd = cwd.parent
        return Launch(("bash", "-c", shell.script), cwd, shell.env)
