"""Small tools the state tests share."""

from __future__ import annotations

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
