"""One-shot maintenance on a state.db file: check, backup, checkpoint, stats.

These open a plain connection of their own and close it; they are safe while
`hermes serve` runs (backup uses SQLite's online backup API).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import apsw
import attrs

from hermes.state.connection import BUSY_TIMEOUT_MS, restamp
from hermes.state.errors import SchemaTooNew, SchemaUnknown, StateError
from hermes.state.schema import known_version, schema_version


def has_table(conn: apsw.Connection, name: str) -> bool:
    """Whether the file has table `name`: a read-only command on a state.db from before
    that table existed shows nothing instead of failing (serve adds it)."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def open_plain(path: Path, readonly: bool = True) -> apsw.Connection:
    """A connection for a one-shot command; the file must exist."""
    if not path.exists():
        raise StateError(f"no database at {path} (hermes serve creates it on first start)")
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def wal_size(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


@attrs.frozen
class CheckReport:
    """`schema_error`: why this hermes cannot use the file's schema (None: it can)."""

    integrity: str
    quick: str
    schema_version: int
    schema_error: SchemaTooNew | SchemaUnknown | None
    wal_bytes: int

    @property
    def ok(self) -> bool:
        return self.integrity == "ok" and self.quick == "ok" and self.schema_error is None


def check(path: Path) -> CheckReport:
    conn = open_plain(path)
    try:
        integrity = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
        quick = "; ".join(r[0] for r in conn.execute("PRAGMA quick_check"))
        version = schema_version(conn)
        try:
            known_version(conn)
            schema_error = None
        except (SchemaTooNew, SchemaUnknown) as exc:
            schema_error = exc
    finally:
        conn.close()
    return CheckReport(integrity, quick, version, schema_error, wal_size(path))


def backup(
    source: Path, dest: Path, progress: Callable[[int, int], None] = lambda done, total: None
) -> int:
    """Copy a consistent snapshot of `source` to `dest` while others keep writing.

    The copy gets a generation stamp of its own, so restoring it over a live
    state.db is noticed by the running writer. Returns the page count.
    """
    if dest.exists():
        raise StateError(f"{dest} already exists; choose a new path")
    src = open_plain(source)
    out = apsw.Connection(str(dest))
    try:
        with out.backup("main", src, "main") as job:
            while not job.done:
                job.step(1024)
                progress(job.page_count - job.remaining, job.page_count)
            pages = job.page_count
        restamp(out)
    except BaseException:
        out.close()
        dest.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    out.close()
    return pages


def checkpoint(path: Path, truncate: bool = False) -> tuple[int, int]:
    """PASSIVE by default; TRUNCATE (waits for readers, empties the WAL) only when asked."""
    conn = open_plain(path, readonly=False)
    try:
        schema_version(conn)  # until it has read the file, it does not know it is in WAL mode
        mode = apsw.SQLITE_CHECKPOINT_TRUNCATE if truncate else apsw.SQLITE_CHECKPOINT_PASSIVE
        return conn.wal_checkpoint(mode=mode)
    finally:
        conn.close()


def stats(path: Path) -> dict[str, int]:
    conn = open_plain(path)
    try:
        return {
            "schema_version": schema_version(conn),
            "sessions": conn.execute("SELECT count(*) FROM sessions").get,
            "live_sessions": conn.execute(
                "SELECT count(*) FROM sessions WHERE ended_at IS NULL"
            ).get,
            "messages": conn.execute("SELECT count(*) FROM messages").get,
            "page_size": conn.execute("PRAGMA page_size").get,
            "pages": conn.execute("PRAGMA page_count").get,
            "free_pages": conn.execute("PRAGMA freelist_count").get,
            "file_bytes": os.stat(path).st_size,
            "wal_bytes": wal_size(path),
        }
    finally:
        conn.close()
