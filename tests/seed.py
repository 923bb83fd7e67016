"""Rows a test sets up in state.db before serve (or a CLI command) reads them, as an
earlier serve would have written them: one write transaction on a migrated file; and
rows a test reads back, read-only, whoever is writing meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from hermes.state.connection import open_writer
from hermes.state.schema import immediate, migrate


@contextmanager
def writing(path: Path) -> Iterator[apsw.Connection]:
    conn = open_writer(path)
    try:
        migrate(conn)
        with immediate(conn):
            yield conn
    finally:
        conn.close()


def rows(path: Path, sql: str, *args: object) -> list[tuple]:
    """What `sql` selects in the state.db at `path` now, on a read-only connection."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()
