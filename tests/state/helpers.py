"""Small tools the state tests share."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import apsw

from hermes.state.writer import DbWriter


def plain(path: Path) -> apsw.Connection:
    """A separate connection, as another process would have."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(10_000)
    return conn


def count(path: Path, sql: str, args: tuple = ()) -> int:
    conn = plain(path)
    try:
        return conn.execute(sql, args).get
    finally:
        conn.close()


def integrity(path: Path) -> str:
    conn = plain(path)
    try:
        return conn.execute("PRAGMA integrity_check").get
    finally:
        conn.close()


def writer_of(registry, gen) -> DbWriter:
    """The DbWriter actor behind a generation (to count its transactions)."""
    for slot in registry._sup._slots:
        if slot.spec.name == f"{gen.path}#{gen.number}":
            return slot.child
    raise LookupError(gen)


class Gate:
    """Holds a write inside the writer's process until `set()`: the test holds an
    exclusive lock on a file; the write `wait_at_gate(conn, gate.path)` takes a
    shared lock on it, which it gets once the test lets go."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"gate-{id(self)}"
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def set(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def wait_at_gate(conn: apsw.Connection, path: Path) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)
