"""A terminal session: one conversation's shell state across commands.

The working directory persists (a `cd` in one call holds for the next; a
deleted directory falls back to its nearest existing parent), secrets stay
out of the child's environment and out of what it prints, and the guards
run before anything does.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

import attrs
import trio

from hermes.home import make_private_dir, path_part
from hermes.terminal.command import CommandResult, RunOptions, run_command
from hermes.terminal.env import EnvPolicy, Redactor
from hermes.terminal.guards import judge

FOREGROUND_MAX = 600.0
CWD_VARIABLE = "HERMES_CWD_FILE"
# `eval` keeps the user's text apart from ours: the trap records the final
# directory even when the command calls `exit` or fails to parse.
WRAPPER = f'trap \'pwd -P > "${CWD_VARIABLE}" 2>/dev/null\' EXIT\neval "$1"'
# Only these change the shell's own directory (directly, or in a file it sources),
# so only commands that mention them pay for the tracking wrapper.
MAY_CHANGE_DIRECTORY = re.compile(r"\b(?:cd|pushd|popd|source)\b|(?:^|[;&|({]\s*)\.\s")


async def session_directory(chosen: Path | None, workspace: Path, session_id: str) -> Path:
    """Where a session's commands start: `chosen` (agent.workdir) for every session, else
    the session's own directory under `workspace`, created 0700 (never HERMES_HOME
    itself, where serve keeps its secrets)."""
    if chosen is not None:
        return chosen
    directory = workspace / path_part(session_id)
    await trio.to_thread.run_sync(make_private_dir, directory)
    return directory


def nearest_existing(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


class TerminalSession:
    """Runs commands for one owner (a chat session, a cron job)."""

    def __init__(
        self,
        cwd: Path,
        *,
        state_dir: Path,
        policy: EnvPolicy | None = None,
        environ: Mapping[str, str] | None = None,
        options: RunOptions | None = None,
    ) -> None:
        self.cwd = Path(cwd)
        self.state_dir = state_dir
        self.policy = policy or EnvPolicy()
        source = dict(os.environ if environ is None else environ)
        self.env = self.policy.child_env(source)
        self.redactor_secrets = self.policy.secret_values(source)
        self.options = options or RunOptions(spill_dir=state_dir / "output")

    async def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        approved: bool = False,
        interrupt: trio.Event | None = None,
    ) -> CommandResult:
        verdict = judge(command, background=False, approved=approved)
        if verdict.action == "block":
            return CommandResult("", None, "blocked", f"blocked: {verdict.reason}")
        if verdict.action == "approve":
            return CommandResult("", None, "pending_approval", f"needs approval: {verdict.reason}")
        if verdict.action == "background":
            return CommandResult(
                "",
                None,
                "refused",
                f"refused in the foreground because {verdict.reason}; "
                "run it with background=true and check on it with the process tool",
            )
        limit = min(timeout or self.options.timeout, FOREGROUND_MAX)
        self.cwd = nearest_existing(self.cwd)
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tracked = MAY_CHANGE_DIRECTORY.search(command) is not None
        cwd_file = self.state_dir / f"cwd-{secrets.token_hex(6)}"
        argv = ["bash", "-c", WRAPPER, "hermes", command] if tracked else ["bash", "-c", command]
        try:
            result = await run_command(
                argv,
                cwd=self.cwd,
                env={**self.env, CWD_VARIABLE: str(cwd_file)} if tracked else self.env,
                options=attrs.evolve(self.options, timeout=limit),
                redactor=Redactor(self.redactor_secrets),
                interrupt=interrupt,
            )
        finally:
            if tracked:
                self._take_cwd(cwd_file)
        return result

    def _take_cwd(self, cwd_file: Path) -> None:
        try:
            text = cwd_file.read_text().strip()
            cwd_file.unlink()
        except FileNotFoundError:
            return
        if text and Path(text).is_dir():
            self.cwd = Path(text)
