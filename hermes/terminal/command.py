"""Running one command: its own session, bounded output, and a whole-tree kill.

`run_command` starts what a backend's `Launch` names (bash, bwrap, ssh) in a new
session (its own process group) with stdin closed and stdout+stderr merged.
Cancelling the scope that runs it kills the whole tree (shielded) and re-raises; an
`interrupt` event kills it and returns exit status 130; a timeout kills it and
returns 124. Whatever the backend, the kill is this one, and a backend whose tree
runs elsewhere too (ssh) is asked to stop that part after it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
import trio

from hermes.terminal.backends.base import Launch
from hermes.terminal.env import Redactor
from hermes.terminal.leftovers import tree_marker
from hermes.terminal.output import DEFAULT_CAP, BoundedOutput, strip_ansi
from hermes.terminal.reaper import become_subreaper
from hermes.terminal.tree import DEFAULT_GRACE, TAG_VARIABLE, ProcessId, TreeKiller

DEFAULT_TIMEOUT = 180.0
DRAIN_IDLE = 0.5  # after the leader exits, stop reading once the pipe is quiet this long
LEFTOVER_GRACE = 0.2  # descendants still running after the leader exited normally
READ_SIZE = 65_536

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


@attrs.frozen
class CommandResult:
    """What a command produced. `status`: ok, timeout, interrupted (plus, from
    guards: blocked, pending_approval, refused)."""

    output: str
    exit_code: int | None
    status: str = "ok"
    error: str | None = None
    full_output_path: str | None = None


@attrs.frozen
class RunOptions:
    timeout: float = DEFAULT_TIMEOUT
    cap: int = DEFAULT_CAP
    grace: float = DEFAULT_GRACE
    drain_idle: float = DRAIN_IDLE
    spill_dir: Path | None = None


class OutputPump:
    """Reads a merged output pipe into `sink` (decoded, secrets redacted) until EOF,
    or until the pipe has been quiet for a bound after the leader exited: a
    grandchild that keeps the pipe open cannot hold the caller forever."""

    def __init__(self, sink: Callable[[str], None], redactor: Redactor | None = None) -> None:
        self.sink = sink
        self.redactor = redactor or Redactor(())
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.scope = trio.CancelScope()
        self.idle: float | None = None

    def leader_exited(self, idle: float) -> None:
        self.idle = idle
        self.scope.deadline = trio.current_time() + idle

    async def run(self, stream: trio.abc.ReceiveStream) -> None:
        feed = self.redactor.feed
        with self.scope:
            while True:
                chunk = await stream.receive_some(READ_SIZE)
                if not chunk:
                    break
                self.sink(feed(self.decoder.decode(chunk)))
                if self.idle is not None:
                    self.scope.deadline = trio.current_time() + self.idle
        self.sink(feed(self.decoder.decode(b"", final=True)))
        self.sink(self.redactor.flush())


@attrs.define
class Spawned:
    process: trio.Process
    killer: TreeKiller
    launch: Launch

    async def kill(self, grace: float) -> None:
        """The whole tree, and what the backend runs elsewhere. Call it shielded."""
        await self.killer.kill(grace)
        if self.launch.stop_remote is not None:
            await self.launch.stop_remote(grace)


@contextlib.asynccontextmanager
async def spawned(
    launch: Launch,
    *,
    grace: float = DEFAULT_GRACE,
    stdin: int = subprocess.DEVNULL,
    stderr: int = subprocess.STDOUT,
) -> AsyncIterator[Spawned]:
    """Start `launch` as the leader of a new session, stdout+stderr merged into one pipe
    (`stderr=subprocess.PIPE`: a pipe of its own, for a child whose stdout is a protocol),
    with what it needs beside it (`launch.beside`) running until it ends.

    Leaving the block by an exception or a cancel kills the whole tree
    (shielded) and reaps the leader. Leaving it normally kills whatever the
    leader left running, with a short grace.
    """
    tag = secrets.token_hex(8)
    become_subreaper()
    async with contextlib.AsyncExitStack() as stack:
        try:
            if launch.beside is not None:
                await stack.enter_async_context(launch.beside())
            process = await trio.lowlevel.open_process(
                list(launch.argv),
                cwd=str(launch.cwd),
                env={**launch.env, **tree_marker(), TAG_VARIABLE: tag},
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
                pass_fds=launch.pass_fds,
            )
        except BaseException:
            launch.discard()
            raise
        for fd in launch.pass_fds:  # the child's now
            os.close(fd)
        leader = ProcessId.of(process.pid) or ProcessId(process.pid, -1)
        handle = Spawned(process, TreeKiller(leader, tag), launch)
        try:
            try:
                if launch.handed is not None:
                    handle.killer.adopt(await launch.handed.read())
                yield handle
            except BaseException:
                with trio.CancelScope(shield=True):
                    await handle.kill(grace)
                    await process.wait()
                    await handle.killer.bury()
                raise
            with trio.CancelScope(shield=True):
                await handle.killer.kill(LEFTOVER_GRACE)
                await process.wait()
                await handle.killer.bury()
        finally:
            with trio.CancelScope(shield=True):
                for pipe in (process.stdin, process.stdout, process.stderr):
                    if pipe is not None:
                        await pipe.aclose()


async def run_command(
    launch: Launch,
    *,
    options: RunOptions = RunOptions(),
    redactor: Redactor | None = None,
    interrupt: trio.Event | None = None,
) -> CommandResult:
    """Run what `launch` names and collect its bounded output."""
    output = BoundedOutput(options.cap, options.spill_dir)
    pump = OutputPump(output.write, redactor)
    status = "ok"
    try:
        async with spawned(launch, grace=options.grace) as child:
            process = child.process
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump.run, process.stdout)
                with trio.move_on_after(options.timeout) as timer:
                    if interrupt is None:
                        await process.wait()
                    else:
                        await _first_of(process.wait, interrupt.wait)
                if timer.cancelled_caught:
                    status = "timeout"
                elif process.returncode is None:
                    status = "interrupted"
                if status != "ok":
                    with trio.CancelScope(shield=True):
                        await child.kill(options.grace)
                        await process.wait()
                pump.leader_exited(options.drain_idle)
    finally:
        output.close()

    text = strip_ansi(output.text())
    full = str(output.full_path) if output.full_path else None
    if status == "timeout":
        text += f"\n[timed out after {options.timeout:g}s; the command's process tree was killed]"
        return CommandResult(text, EXIT_TIMEOUT, status, "timeout", full)
    if status == "interrupted":
        text += "\n[interrupted; the command's process tree was killed]"
        return CommandResult(text, EXIT_INTERRUPTED, status, "interrupted", full)
    return CommandResult(text, process.returncode, status, None, full)


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return when the first of `waits` returns; the others are cancelled."""
    async with trio.open_nursery() as nursery:
        for wait in waits:

            async def one(wait=wait) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(one)
