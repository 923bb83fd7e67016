"""Killing a whole process tree: the group, every descendant seen, then SIGKILL.

A process is named by (pid, start time): a pid whose start time differs from
the recorded one was reused by an unrelated process and is never signalled.
"""

from __future__ import annotations

import logging
import os
import signal

import attrs
import psutil
import trio

from hermes.terminal.reaper import reap

DEFAULT_GRACE = 2.0
_HAVE_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
KILL_WAIT = 5.0  # a process stuck in uninterruptible sleep does not die at once

log = logging.getLogger(__name__)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc/PID/stat, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # the name may hold spaces and ')'
    return fields[0].decode(), int(fields[19])


@attrs.frozen
class ProcessId:
    """A process named by pid and start time, so a reused pid is never mistaken for it."""

    pid: int
    started: int  # clock ticks after boot (field 22 of /proc/PID/stat)

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        stat = _stat(pid)
        return None if stat is None or stat[0] in "ZX" else cls(pid, stat[1])

    def alive(self) -> bool:
        """Running (not a zombie) and still the process we recorded."""
        stat = _stat(self.pid)
        return stat is not None and stat[1] == self.started and stat[0] not in "ZX"

    def signal(self, signum: int) -> None:
        """Send `signum` only if the pid still names the recorded process."""
        if self.alive():
            try:
                os.kill(self.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc/PID/task/*/children (cheap; Linux),
    else from psutil (which reads every process's stat)."""
    if not _HAVE_PROC_CHILDREN:
        try:
            return [c.pid for c in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    pids: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                pids.extend(int(p) for p in f.read().split())
        except OSError:
            continue  # that thread or the whole process exited meanwhile
    return pids


def descendant_pids(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in child_pids(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def descendants(root: ProcessId, zombies: set[int] | None = None) -> set[ProcessId]:
    """Every living descendant of `root`, including ones that called setsid.

    Exited-but-unreaped descendants are added to `zombies`: once their parents
    die they become ours (we are a subreaper) and must be reaped.
    """
    if not root.alive():
        return set()
    found = set()
    for pid in descendant_pids(root.pid):
        stat = _stat(pid)
        if stat is None:
            continue
        if stat[0] in "ZX":
            if zombies is not None:
                zombies.add(pid)
        else:
            found.add(ProcessId(pid, stat[1]))
    return found


TAG_VARIABLE = "HERMES_TREE"


def tagged(tag: str) -> set[ProcessId]:
    """Our descendants whose environment carries `tag`: every process of one
    command's tree inherits it. A process that double-forked away from its
    tree is still ours, because this process is a child subreaper."""
    found = set()
    needle = f"{TAG_VARIABLE}={tag}".encode()
    for pid in descendant_pids(os.getpid()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        proc = ProcessId.of(pid)
        if proc is not None:
            found.add(proc)
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class TreeKiller:
    """Remembers every process seen in one tree, so descendants that leave the
    group (setsid) or lose their parent are still found when it is time to kill."""

    def __init__(self, leader: ProcessId, tag: str | None = None) -> None:
        self.leader = leader
        self.tag = tag
        self.pgid = leader.pid  # the leader runs in a new session: its pid is the group id
        self.seen: set[ProcessId] = {leader}
        self.adopted: set[ProcessId] = set()
        self.zombies: set[int] = set()

    def adopt(self, pid: int | None) -> None:
        """`pid` is of this tree though the leader will not wait for it (bubblewrap's
        namespace init): killed with it, and reaped by `bury` once it ends."""
        stat = _stat(pid) if pid is not None else None
        if pid is not None and stat is not None:  # a zombie already, perhaps: still reaped
            found = ProcessId(pid, stat[1])
            self.seen.add(found)
            self.adopted.add(found)

    async def bury(self) -> None:
        """After the leader is reaped: wait (bounded) for the adopted members to end, then
        reap them; the leader's exit made them our children, and unreaped they would stay
        zombies for as long as serve runs."""
        await wait_gone([p for p in self.adopted if p.alive()], KILL_WAIT)
        reap(p.pid for p in self.adopted)

    def refresh(self, scan_tags: bool = False) -> None:
        for known in list(self.seen):
            self.seen |= descendants(known, self.zombies)
        if scan_tags and self.tag is not None:
            self.seen |= tagged(self.tag)

    def alive(self) -> list[ProcessId]:
        return [p for p in self.seen if p.alive()]

    def _group_is_ours(self) -> bool:
        """Whether the group id still names this tree's group. Linux keeps a pid
        reserved while a group of that id exists, so if the pid now names another
        process that leads a group of its own, our group is gone and the id is its."""
        if self.leader.alive():
            return True
        try:
            return os.getpgid(self.pgid) != self.pgid
        except ProcessLookupError:
            return True  # nobody has the pid: any group of that id is ours (or gone)

    def _signal_all(self, signum: int) -> None:
        if self._group_is_ours():
            try:
                os.killpg(self.pgid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.seen:
            proc.signal(signum)

    async def kill(self, grace: float = DEFAULT_GRACE) -> None:
        """SIGTERM the group and every descendant, wait up to `grace`, SIGKILL what
        is left, reap what we adopted. Call it shielded: it must finish."""
        self.refresh(scan_tags=True)
        if not self.alive() and not (self._group_is_ours() and group_alive(self.pgid)):
            return
        self._signal_all(signal.SIGTERM)
        self.refresh(scan_tags=True)  # children forked while the signal was on its way
        self._signal_all(signal.SIGTERM)
        await wait_gone(self.alive(), grace)
        if self.alive():
            self.refresh(scan_tags=True)
            self._signal_all(signal.SIGKILL)
            await wait_gone(self.alive(), KILL_WAIT)
            for proc in self.alive():
                log.error("pid %d survived SIGKILL (uninterruptible sleep?)", proc.pid)
        reap({p.pid for p in self.seen if p != self.leader} | self.zombies)


async def wait_gone(procs: list[ProcessId], timeout: float) -> None:
    """Wait until every one of `procs` has exited (zombies count as exited), or `timeout`."""
    with trio.move_on_after(timeout):
        async with trio.open_nursery() as nursery:
            for proc in procs:
                nursery.start_soon(_wait_exit, proc)


async def _wait_exit(proc: ProcessId) -> None:
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    try:
        if proc.alive():  # checked after opening: the fd now pins this very process
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
