"""Small tools the state tests share."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw

from hermes.state.registry import Registry, resolve
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


def writer_of(registry: Registry, path: Path) -> DbWriter:
    """The DbWriter actor of the path's live generation (to count its transactions)."""
    return registry._live[resolve(path)].actor


class Gate:
    """Holds a write inside the writer's thread until `set()`: queue `db.write(gate.hold)`
    first, and the writes queued behind it share the writer's next batch."""

    def __init__(self) -> None:
        self._open = threading.Event()

    def hold(self, conn: apsw.Connection) -> None:
        self._open.wait(timeout=60)

    def set(self) -> None:
        self._open.set()
