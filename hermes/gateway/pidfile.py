"""serve.pid: one `hermes serve` per HERMES_HOME, enforced by a lock, not by a guess.

The file is locked with flock for the life of the process, so a serve that was
killed leaves no stale claim: the kernel drops the lock with the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from hermes.actors.errors import Unavailable


class AlreadyRunning(Unavailable):
    """Another serve of this HERMES_HOME holds the pid file."""

    def __init__(self, path: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "a process that is still starting"
        super().__init__(f"another hermes serve is already running for this home ({who}; {path})")
        self.pid = pid


def _read_pid(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def hold_pid_file(path: Path) -> Iterator[None]:
    """Lock `path` and write our pid into it; raise AlreadyRunning if it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(path, _read_pid(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            # Emptied, not unlinked: unlinking would let a waiter lock an orphaned inode.
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def serve_holds(path: Path) -> bool:
    """Whether a serve holds this pid file now (a CLI's question: send a change to it,
    or make the change in state.db itself)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


def holder_pid(path: Path) -> int | None:
    """The pid of the serve that holds this pid file now; None when none does (a killed
    one leaves its pid behind, unlocked)."""
    if not serve_holds(path):
        return None
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
