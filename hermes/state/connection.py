"""Opening state.db connections, and telling whether the file is still the one we opened.

The identity of a live file is (st_dev, st_ino) from os.stat of its path plus a
generation stamp kept in the database header (PRAGMA application_id). The
stamp is read from the main file through SQLite's own VFS, not through the
connection: after `cp other.db state.db` a connection still sees its old
pages in the WAL and would report the old stamp. Nothing here opens the file
with plain file calls, which would drop this process's POSIX locks on it.
"""

from __future__ import annotations

import os
import secrets
import struct
import time
from pathlib import Path

import apsw
import attrs

from hermes.state.schema import immediate

BUSY_TIMEOUT_MS = 10_000
STAMP_OFFSET = 68  # the application_id field of the SQLite header


@attrs.frozen
class FileIdentity:
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return cls(st.st_dev, st.st_ino)


def _configure(conn: apsw.Connection) -> None:
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.execute("PRAGMA foreign_keys = ON")


def open_writer(path: Path) -> apsw.Connection:
    """The one write connection of a generation: WAL, synchronous=NORMAL, busy timeout."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    try:
        _configure(conn)
        mode = _switch_to_wal(conn)
        if str(mode).lower() != "wal":
            raise apsw.CantOpenError(f"{path}: cannot use WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: apsw.Connection) -> str:
    """Switching the journal mode takes a lock the busy handler does not wait for
    when another process is creating the same new file at the same moment."""
    for attempt in range(50):
        try:
            return conn.execute("PRAGMA journal_mode = WAL").get
        except apsw.BusyError:
            time.sleep(0.01 * (attempt + 1))  # in the writer's worker thread, never on Trio's
    return conn.execute("PRAGMA journal_mode = WAL").get


def open_reader(path: Path) -> apsw.Connection:
    """A read-only connection; it never checkpoints, even when it is the last to close."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    _configure(conn)
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    return conn


def open_checkpointer(path: Path) -> apsw.Connection:
    """A second connection that only checkpoints: it never waits for a lock, and
    closing it never checkpoints (the writer's own close does that)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    try:  # reading once makes it see the file is in WAL mode; until then it cannot checkpoint
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn


def new_stamp() -> int:
    """A random non-zero signed 32-bit stamp (application_id is a signed int)."""
    return struct.unpack(">i", secrets.token_bytes(4))[0] or 1


def ensure_stamp(conn: apsw.Connection) -> int:
    """The file's generation stamp, written first if the file has none."""
    with immediate(conn):
        stamp = conn.execute("PRAGMA application_id").get
        if stamp == 0:
            stamp = new_stamp()
            conn.execute(f"PRAGMA application_id = {stamp}")
    return stamp


def restamp(conn: apsw.Connection) -> int:
    """Give a copy (a backup) its own stamp, so restoring it over a live file is noticed."""
    stamp = new_stamp()
    with immediate(conn):
        conn.execute(f"PRAGMA application_id = {stamp}")
    return stamp


class HeaderReader:
    """Reads the stamp from the main file's header through SQLite's VFS."""

    def __init__(self, path: Path) -> None:
        flags = apsw.SQLITE_OPEN_MAIN_DB | apsw.SQLITE_OPEN_READONLY
        self._file = apsw.VFSFile("", str(path), [flags, 0])

    def stamp(self) -> int | None:
        """The stamp in the file right now; None if the header is not a SQLite header."""
        try:
            header = self._file.xRead(100, 0)
        except apsw.IOError:
            return None  # shorter than a header: emptied or truncated
        if not header.startswith(b"SQLite format 3\x00"):
            return None
        return struct.unpack(">i", header[STAMP_OFFSET : STAMP_OFFSET + 4])[0]

    def close(self) -> None:
        self._file.xClose()
