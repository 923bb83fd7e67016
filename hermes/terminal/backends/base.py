"""The seam between a command and where it runs.

A backend (this machine, the bubblewrap sandbox, another machine over ssh; later a
container) turns one `Shell` (the bash script to run, where it starts, its environment)
into a `Launch`: the process this machine starts, what runs beside it while it runs (the
sandbox's network proxy), and how to reach what a local kill cannot (the remote tree).
Running, reading output, timeouts and the whole-tree kill are the terminal's, the same in
every backend (hermes.terminal.command), so the tools never know where a command runs.

Every backend runs the same script (`shell_script`): it starts in the session's
directory as the backend sees it (its nearest existing parent when it is gone), and,
when asked, says on its last line where it ended, behind a mark nobody can guess, so a
`cd` holds for the next command wherever the shell ran.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import attrs
import trio

Network = str  # "none" | "public": what a confined command may reach


@attrs.frozen
class Shell:
    """One command as a backend is asked to start it."""

    script: str  # the bash text to run (shell_script's)
    cwd: str  # where it starts, as the backend sees paths
    env: Mapping[str, str] = attrs.field(repr=False)  # the allow-listed environment
    workdir: Path  # the session's own directory on this machine
    network: Network = "none"
    stdin: bool = False  # kept open (a background process's `process write`)
    readable: tuple[Path, ...] = ()  # what a confined command may read too: media, skills


@attrs.frozen
class Launch:
    """What this machine runs for one command, once. `beside`: entered before it starts
    and left after it ends (what must run while it runs); `stop_remote(grace)`: called,
    shielded, after hermes killed the local tree, for what runs where a local kill cannot
    reach. `pass_fds`: descriptors the process gets (closed here once it started);
    `handed`: where it says the pid of a member of its tree it starts and does not wait
    for (bubblewrap's namespace init, which outlives it by a moment), so the tree's kill
    and reaping know it. A launch not started is `discard`ed: its descriptors closed."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] = attrs.field(repr=False)
    beside: Callable[[], AbstractAsyncContextManager[object]] | None = None
    stop_remote: Callable[[float], Awaitable[None]] | None = None
    pass_fds: tuple[int, ...] = ()
    handed: Handed | None = None

    def discard(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        if self.handed is not None:
            os.close(self.handed.fd)


@attrs.frozen
class Handed:
    """Our end of a pipe a launched process writes a report to, and how to read the pid of
    the member it hands over from it."""

    fd: int
    parse: Callable[[bytes], int | None]

    async def read(self, limit: int = 65_536, timeout: float = 10.0) -> int | None:
        """The pid, once the process wrote and closed its end (None: it did not say);
        the pipe is closed after."""
        data = b""
        async with trio.lowlevel.FdStream(self.fd) as stream:
            with trio.move_on_after(timeout):
                while len(data) < limit and (piece := await stream.receive_some(4096)):
                    data += piece
        return self.parse(data)


class Backend(Protocol):
    """Where commands run. `name` shows in the tool line and in `hermes doctor`."""

    name: str
    confined: bool  # the command sees only its session's directory (the sandbox)

    def start_dir(self, workdir: Path) -> str:
        """Where a session whose directory is `workdir` starts, in the backend's paths."""

    def launch(self, shell: Shell) -> Launch:
        """The process that runs `shell`."""


class BackendUnavailable(Exception):
    """A backend that cannot run commands here (bubblewrap missing, user namespaces
    off); the message says why and what would fix it."""


@contextlib.asynccontextmanager
async def nothing_beside() -> AsyncIterator[None]:
    yield


WRAPPER_DIR = "__hermes_d"


def new_mark() -> str:
    """A mark for one command's last line: unguessable, so output cannot fake one."""
    return f"HERMES-CWD-{secrets.token_hex(8)}:"


def shell_script(command: str, cwd: str, mark: str | None = None) -> str:
    """`command` as every backend runs it: in `cwd` (or its nearest existing parent), and
    with `mark`, ending with a line `mark` + the directory it ended in (an EXIT trap, so
    `exit` and a failure still say it). `eval` keeps the user's text apart from ours."""
    lines = [
        f"{WRAPPER_DIR}={shlex.quote(cwd)}",
        f'while ! cd -- "${WRAPPER_DIR}" 2>/dev/null; do case ${WRAPPER_DIR} in /|"") cd /;'
        f" break;; esac; {WRAPPER_DIR}=${{{WRAPPER_DIR}%/*}}; done",
        f"unset {WRAPPER_DIR}",
    ]
    if mark is not None:
        lines.append(f'trap \'printf "\\n%s%s\\n" {mark} "$(pwd -P)"\' EXIT')
    lines.append(f"eval {shlex.quote(command)}")
    return "\n".join(lines)


def take_mark(output: str, mark: str) -> tuple[str, str | None]:
    """`output` without the lines `shell_script` added, and the directory the last one
    names (None: the command ended before it could say, killed or timed out). Every line
    with the mark goes: a child the command left behind may have run the trap too (seen
    on a busy machine), and the mark is unguessable, so no line of the command's has it."""
    where = None
    while (at := output.rfind("\n" + mark)) >= 0:
        end = output.find("\n", at + 1)
        end = len(output) if end < 0 else end
        if where is None:
            where = output[at + 1 + len(mark) : end] or None
        output = output[:at] + output[end + 1 :]
    return output, where
