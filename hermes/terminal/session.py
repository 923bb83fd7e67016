"""A terminal session: one conversation's shell state across commands.

The working directory persists per backend (a `cd` in one call holds for the next
command that runs there; a deleted directory falls back to its nearest existing
parent), the environment is the allow-listed one, secrets stay out of what a command
prints, and the guards run before anything does. Where each command runs is its
`Placement` (hermes.terminal.placement); the session only remembers, for each backend,
where its shell was left.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import trio

from hermes.home import make_private_dir, path_part
from hermes.terminal.backends.base import Backend, Launch, Shell, new_mark, shell_script, take_mark
from hermes.terminal.command import CommandResult, RunOptions, run_command
from hermes.terminal.env import EnvPolicy, Redactor
from hermes.terminal.guards import judge
from hermes.terminal.placement import Backends, Placement

FOREGROUND_MAX = 600.0


async def own_directory(workspace: Path, session_id: str) -> Path:
    """The session's own directory under `workspace`, created 0700: where its sandboxed
    commands run, whatever `agent.workdir` says."""
    directory = workspace / path_part(session_id)
    await trio.to_thread.run_sync(make_private_dir, directory)
    return directory


class TerminalSession:
    """Runs commands for one owner (a chat session, a cron job). `workdir`: where its
    unconfined commands start (agent.workdir, or its own directory); `own`: its own
    directory, the only one a sandboxed command of it sees (default `workdir`);
    `backends`: serve's, which place each command (default: this machine only)."""

    def __init__(
        self,
        workdir: Path,
        *,
        state_dir: Path,
        own: Path | None = None,
        policy: EnvPolicy | None = None,
        environ: Mapping[str, str] | None = None,
        options: RunOptions | None = None,
        backends: Backends | None = None,
    ) -> None:
        self.backends = backends or Backends.host_only()
        self.workdir = Path(workdir)
        self.own = Path(own) if own is not None else self.workdir
        self.state_dir = state_dir
        self.policy = policy or EnvPolicy()
        source = dict(os.environ if environ is None else environ)
        self.env = self.policy.child_env(source)
        self.redactor_secrets = self.policy.secret_values(source)
        self.options = options or RunOptions(spill_dir=state_dir / "output")
        self._cwds: dict[str, str] = {}  # by backend name: where its shell was left
        # What a sandboxed command may read besides its directory, set by each turn: the
        # conversation's files (its user's own cached media; the rest of the cache it never
        # sees) and the skills its caller has.
        self.readable: tuple[Path, ...] = ()

    def cwd_in(self, backend: Backend) -> str:
        """Where the next command on `backend` starts, as that backend sees paths."""
        found = self._cwds.get(backend.name)
        return found if found is not None else backend.start_dir(self._dir_for(backend))

    def _keeps(self, placement: Placement, ended_in: str) -> bool:
        """Whether the directory a command said it ended in is kept for the next one. A
        confined command can print the mark itself (it reads its own command line), so
        its word is taken only for its own directory and /tmp: no other path it names
        shows up where the owner reads (an approval prompt, a process list)."""
        if not placement.confined:
            return True
        if "\n" in ended_in or not ended_in.startswith("/"):
            return False
        where = Path(ended_in)
        return where.is_relative_to(self.own) or where.is_relative_to("/tmp")

    def _dir_for(self, backend: Backend) -> Path:
        return self.own if backend.confined else self.workdir

    def launch(
        self, command: str, placement: Placement, *, mark: str | None = None, stdin: bool = False
    ) -> Launch:
        """How `placement`'s backend starts `command` for this session (with `mark`: saying
        where it ended, for `run`)."""
        backend = placement.backend
        if backend is None:
            raise ValueError(f"nowhere to run a command: {placement.why}")
        cwd = self.cwd_in(backend)
        script = shell_script(command, cwd, mark)
        env = self.env if placement.pass_env else EnvPolicy().child_env(self.env)
        shell = Shell(
            script, cwd, env, self._dir_for(backend), placement.network, stdin, self.readable
        )
        return backend.launch(shell)

    async def run(
        self,
        command: str,
        *,
        placement: Placement,
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
        make_private_dir(self.state_dir)  # where a long output spills (a local mkdir)
        mark = new_mark()
        result = await run_command(
            self.launch(command, placement, mark=mark),
            options=attrs.evolve(self.options, timeout=limit),
            redactor=Redactor(self.redactor_secrets),
            interrupt=interrupt,
        )
        output, ended_in = take_mark(result.output, mark)
        if (
            ended_in is not None
            and placement.backend is not None
            and self._keeps(placement, ended_in)
        ):
            self._cwds[placement.backend.name] = ended_in
        return attrs.evolve(result, output=output)
