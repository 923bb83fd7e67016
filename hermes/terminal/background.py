"""Background processes: started by the agent, checked on later, killed with their owner.

The BackgroundProcesses actor runs each process as a task in its own
nursery, so a kill, the owner ending, or serve draining takes the whole tree
down. Output goes to a ring buffer (the last 200,000 characters).
"""

from __future__ import annotations

import secrets
import subprocess
from typing import Any

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.errors import Invalid
from hermes.terminal.backends.base import Launch
from hermes.terminal.command import DRAIN_IDLE, OutputPump, spawned
from hermes.terminal.env import Redactor
from hermes.terminal.guards import judge
from hermes.terminal.output import RingBuffer
from hermes.terminal.tree import DEFAULT_GRACE

RING_SIZE = 200_000
KEEP_FINISHED = 30 * 60.0
MAX_TRACKED = 64
TAIL_CHARS = 2_000


class ProcessError(Invalid):
    """A background process request that cannot be done (unknown id, limits, guards)."""


@attrs.define(eq=False)
class _Proc:
    id: str
    command: str
    owner: str | None
    persist: bool
    started_at: float  # trio clock
    ran_in: str  # its backend's name
    cwd: str  # where it started, as its backend sees paths
    by: str | None  # who started it ("platform:user"), in a conversation many share
    ring: RingBuffer = attrs.Factory(lambda: RingBuffer(RING_SIZE))
    pid: int | None = None
    exit_code: int | None = None
    finished_at: float | None = None
    killed: bool = False
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    stdin: trio.abc.SendStream | None = None

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def summary(self, now: float) -> dict[str, Any]:
        end = self.finished_at if self.finished_at is not None else now
        return {
            "id": self.id,
            "command": self.command,
            "owner": self.owner,
            "pid": self.pid,
            "status": "running" if self.running else ("killed" if self.killed else "exited"),
            "exit_code": self.exit_code,
            "uptime": round(end - self.started_at, 3),
            "persist": self.persist,
            "ran_in": self.ran_in,
            "cwd": self.cwd,
            "by": self.by,
        }


# -- messages ------------------------------------------------------------------


@attrs.frozen
class Start:
    """Start `command` (judged by the guard here) as `launch` says: on the backend named
    `ran_in`, in `cwd` as that backend sees paths."""

    command: str
    launch: Launch
    owner: str | None = None
    ran_in: str = "host"
    cwd: str = ""
    by: str | None = None
    persist: bool = False
    secrets: tuple[str, ...] = ()
    approved: bool = False


@attrs.frozen
class ListProcs:
    owner: str | None = None


@attrs.frozen
class Poll:
    id: str


@attrs.frozen
class Log:
    id: str
    offset: int = 0
    limit: int | None = None


@attrs.frozen
class DoneEvent:
    id: str


@attrs.frozen
class Kill:
    id: str


@attrs.frozen
class WriteStdin:
    id: str
    data: str


@attrs.frozen
class OwnerEnded:
    owner: str


class BackgroundProcesses(Actor):
    """Tracks at most 64 processes; finished ones are forgotten after 30 minutes."""

    def __init__(self, grace: float = DEFAULT_GRACE, name: str = "background") -> None:
        super().__init__(name)
        self.grace = grace
        self._procs: dict[str, _Proc] = {}

    async def handle(self, msg: Any) -> Any:
        self._prune()
        now = trio.current_time()
        match msg:
            case Start():
                return await self._start(msg)
            case ListProcs(owner=owner):
                procs = [p for p in self._procs.values() if owner is None or p.owner == owner]
                return [p.summary(now) for p in procs]
            case Poll(id=pid):
                proc = self._find(pid)
                return {**proc.summary(now), "output_tail": proc.ring.tail(TAIL_CHARS)}
            case Log(id=pid, offset=offset, limit=limit):
                proc = self._find(pid)
                return {
                    "id": proc.id,
                    "offset": max(offset, proc.ring.start),
                    "total": proc.ring.total,
                    "text": proc.ring.read(offset, limit),
                }
            case DoneEvent(id=pid):
                return self._find(pid).done
            case Kill(id=pid):
                proc = self._find(pid)
                if proc.running:
                    proc.killed = True
                    proc.scope.cancel()
                return proc.done
            case WriteStdin(id=pid, data=data):
                return await self._write(self._find(pid), data)
            case OwnerEnded(owner=owner):
                ended = []
                for proc in self._procs.values():
                    if proc.owner == owner and not proc.persist and proc.running:
                        proc.killed = True
                        proc.scope.cancel()
                        ended.append(proc.done)
                return ended
        raise ProcessError(f"{self.name} cannot handle {type(msg).__name__}")

    def _find(self, ref: str) -> _Proc:
        if ref in self._procs:
            return self._procs[ref]
        hex_part = ref.removeprefix("proc_")
        if len(hex_part) < 4:
            raise ProcessError(f"process id {ref!r} is too short: give 4 or more characters")
        matches = [p for p in self._procs.values() if p.id[5:].startswith(hex_part)]
        if not matches:
            raise ProcessError(f"no background process {ref!r}")
        if len(matches) > 1:
            raise ProcessError(
                f"process id {ref!r} is ambiguous: {', '.join(p.id for p in matches)}"
            )
        return matches[0]

    def _prune(self) -> None:
        now = trio.current_time()
        for proc in list(self._procs.values()):
            if proc.finished_at is not None and now - proc.finished_at > KEEP_FINISHED:
                del self._procs[proc.id]

    async def _start(self, msg: Start) -> dict[str, Any]:
        try:
            self._admit(msg)
        except ProcessError:
            msg.launch.discard()  # never started: what it holds open is closed
            raise
        proc = _Proc(
            id=f"proc_{secrets.token_hex(6)}",
            command=msg.command,
            owner=msg.owner,
            persist=msg.persist,
            started_at=trio.current_time(),
            ran_in=msg.ran_in,
            cwd=msg.cwd or str(msg.launch.cwd),
            by=msg.by,
        )
        await self.nursery.start(self._supervise, proc, msg)
        self._procs[proc.id] = proc
        return proc.summary(trio.current_time())

    def _admit(self, msg: Start) -> None:
        """ProcessError when `msg` may not start: the guard, or too many running."""
        verdict = judge(msg.command, background=True, approved=msg.approved)
        if verdict.action == "block":
            raise ProcessError(f"blocked: {verdict.reason}")
        if verdict.action == "approve":
            raise ProcessError(f"needs approval: {verdict.reason}")
        if len(self._procs) >= MAX_TRACKED:
            finished = [p for p in self._procs.values() if not p.running]
            if not finished:
                raise ProcessError(f"{MAX_TRACKED} background processes are already running")
            oldest = min(finished, key=lambda p: p.finished_at or 0)
            del self._procs[oldest.id]

    async def _supervise(
        self, proc: _Proc, msg: Start, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        pump = OutputPump(proc.ring.write, Redactor(msg.secrets))
        child = None
        try:
            with proc.scope:
                async with spawned(msg.launch, grace=self.grace, stdin=subprocess.PIPE) as child:
                    proc.pid = child.process.pid
                    proc.stdin = child.process.stdin
                    task_status.started()
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(pump.run, child.process.stdout)
                        await child.process.wait()
                        pump.leader_exited(DRAIN_IDLE)
        finally:
            if child is not None:
                proc.exit_code = child.process.returncode
            proc.finished_at = trio.current_time()
            proc.stdin = None
            proc.done.set()

    async def _write(self, proc: _Proc, data: str) -> int:
        if proc.stdin is None or not proc.running:
            raise ProcessError(f"{proc.id} is not running")
        payload = data.encode()
        with trio.move_on_after(5) as timer:
            await proc.stdin.send_all(payload)
        if timer.cancelled_caught:
            raise ProcessError(f"{proc.id} is not reading its input")
        return len(payload)


async def wait_for(address: Any, ref: str, timeout: float) -> dict[str, Any]:
    """Wait (outside the actor) until the process ends or `timeout` passes; then poll it."""
    done: trio.Event = await address.call(DoneEvent(ref))
    with trio.move_on_after(timeout):
        await done.wait()
    return await address.call(Poll(ref))
