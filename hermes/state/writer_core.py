"""The writer's SQLite side: its requests and the blocking code that runs them.

A DbWriter actor owns one WriterCore and calls it from worker threads, one
call at a time on its commit lane and checkpoints on a lane of their own;
nothing here knows about Trio.

Group commit: a batch runs in one BEGIN IMMEDIATE transaction, each request
inside its own SAVEPOINT so a failing request fails alone, and commits once.
Appends of messages that follow one another in a batch go in as one
statement. Checkpoints never run on the commit path: SQLite's automatic
checkpoint is replaced by a WAL hook that records the WAL's size, and a
PASSIVE checkpoint runs on a second connection while batches keep committing.
Before each batch the core checks that the path still names the file it
opened (device, inode and the stamp in the header); if not, it retires: every
later request fails with StateDbReplacedError and it closes its connection
without checkpointing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import apsw
import attrs
import outcome

from hermes.state import schema
from hermes.state.connection import (
    FileIdentity,
    HeaderReader,
    ensure_stamp,
    open_checkpointer,
    open_writer,
)
from hermes.state.errors import StateDbReplacedError, StateError
from hermes.state.messages import append_message, append_messages

log = logging.getLogger(__name__)

BUSY_RETRIES = 6  # each waits up to the connection's busy timeout (10 s)


@attrs.frozen
class Write:
    """Run `fn(conn, *args, **kwargs)` inside the writer's transaction; its value is the reply."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def is_append(self) -> bool:
        """An `append_message(conn, message)`: appends in a row go in as one statement."""
        return self.fn is append_message and len(self.args) == 1 and not self.kwargs


@attrs.frozen
class CheckIdentity:
    """Reply True while the path still names the opened file; retire (and reply False) if not."""


class WriterCore:
    """The write connection of one file and its checkpointer connection.

    `open`, `batch` and `close` run one at a time on the commit lane;
    `checkpoint` and `close_checkpointer` on the checkpoint lane, so a
    checkpoint never holds up a commit.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.retired: str | None = None
        self.batches = 0  # committed transactions, for tests and stats
        self.wal_pages = 0  # after the last commit, from the WAL hook
        self._conn: apsw.Connection | None = None
        self._header: HeaderReader | None = None
        self._identity: FileIdentity | None = None
        self._stamp = 0
        self._stamp_on_disk = False
        self._checkpointer: apsw.Connection | None = None
        self._checkpointer_header: HeaderReader | None = None
        self._checkpointer_lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    # -- life cycle -----------------------------------------------------------

    def open(self) -> None:
        conn = open_writer(self.path)
        try:
            schema.migrate(conn)
            self._stamp = ensure_stamp(conn)
            passive_checkpoint(conn)  # puts the stamp in the main file's header
            self._identity = FileIdentity.of(self.path)
            self._header = HeaderReader(self.path)
            conn.set_wal_hook(self._wal_grew)  # replaces SQLite's automatic checkpoint
            self._checkpointer = open_checkpointer(self.path)
            self._checkpointer_header = HeaderReader(self.path)
        except BaseException:
            self.close_checkpointer()
            conn.close()
            raise
        self._conn = conn

    def close(self, checkpoint: bool) -> None:
        """Close the write connection; a PASSIVE checkpoint first if asked (never for a
        retired file, whose stale WAL frames must not reach whatever the path is now)."""
        self.close_checkpointer()
        conn, self._conn = self._conn, None
        if self._header is not None:
            self._header.close()
            self._header = None
        if conn is None:
            return
        if self.retired is not None:
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        elif checkpoint:
            passive_checkpoint(conn)
        conn.close()

    # -- the identity check -----------------------------------------------------

    def _replaced_why(self, header: HeaderReader | None) -> str | None:
        identity = FileIdentity.of(self.path)
        if identity is None:
            return "the file is gone"
        if identity != self._identity:
            return "another file was moved into its place"
        stamp = header.stamp() if header is not None else None
        if stamp == self._stamp:
            self._stamp_on_disk = True
            return None
        if stamp == 0 and not self._stamp_on_disk:
            return None  # our stamp is still in the WAL, not yet checkpointed
        return "its contents were overwritten by another database"

    def _retire(self, why: str) -> None:
        self.retired = why
        log.error("state db %s was replaced (%s); this generation is retired", self.path, why)
        self.close(False)

    def _replaced(self) -> StateDbReplacedError:
        return StateDbReplacedError(str(self.path), self.retired or "retired")

    # -- batches ----------------------------------------------------------------

    def batch(self, msgs: list[Any]) -> list[outcome.Outcome]:
        if self.retired is None and self._conn is not None:
            why = self._replaced_why(self._header)
            if why is not None:
                self._retire(why)
        if self.retired is not None or self._conn is None:
            return [
                outcome.Value(False)
                if type(m) is CheckIdentity
                else outcome.Error(self._replaced())
                for m in msgs
            ]
        for attempt in range(BUSY_RETRIES):
            try:
                return self._transaction(msgs)
            except apsw.BusyError:
                log.warning("%s: busy for %d s; retrying the batch", self.path, 10 * (attempt + 1))
        err = StateError(f"{self.path}: another process held the write lock for too long")
        return [outcome.Error(err) for _ in msgs]

    def _transaction(self, msgs: list[Any]) -> list[outcome.Outcome]:
        conn = self._conn
        cur = conn.cursor()  # reused for the savepoint statements: cheaper than conn.execute
        results: list[outcome.Outcome | None] = [None] * len(msgs)
        appends: list[int] = []  # indexes of the appends not yet run, in order
        conn.execute("BEGIN IMMEDIATE")
        try:
            for i, msg in enumerate(msgs):
                if type(msg) is Write and msg.is_append:
                    appends.append(i)
                    continue
                self._append_all(conn, cur, msgs, appends, results)  # keep the order
                if type(msg) is Write:
                    results[i] = _savepoint(conn, cur, msg.fn, msg.args, msg.kwargs)
                elif type(msg) is CheckIdentity:
                    results[i] = outcome.Value(True)
                else:
                    results[i] = outcome.Error(TypeError(f"DbWriter cannot handle {msg!r}"))
            self._append_all(conn, cur, msgs, appends, results)
            conn.execute("COMMIT")
        except BaseException:
            if not conn.in_transaction:
                raise
            conn.execute("ROLLBACK")
            raise
        self.batches += 1
        return results

    @staticmethod
    def _append_all(
        conn: apsw.Connection,
        cur: apsw.Cursor,
        msgs: list[Any],
        appends: list[int],
        results: list[outcome.Outcome | None],
    ) -> None:
        """Run the waiting appends as one call; if it fails, one at a time."""
        if not appends:
            return
        messages = [msgs[i].args[0] for i in appends]
        together = _savepoint(conn, cur, append_messages, (messages,), {})
        for n, i in enumerate(appends):
            if isinstance(together, outcome.Value):
                results[i] = outcome.Value(together.value[n])
            else:
                results[i] = _savepoint(conn, cur, append_message, (messages[n],), {})
        appends.clear()

    # -- checkpoints ------------------------------------------------------------

    def _wal_grew(self, conn: apsw.Connection, name: str, pages: int) -> int:
        self.wal_pages = pages
        return apsw.SQLITE_OK

    def checkpoint(self) -> bool:
        """A PASSIVE checkpoint on the second connection; False if none ran
        (the file was replaced, or the checkpointer is closed)."""
        with self._checkpointer_lock:
            if self.retired is not None or self._checkpointer is None:
                return False
            if self._replaced_why(self._checkpointer_header):
                return False  # the next batch's identity check retires the writer
            passive_checkpoint(self._checkpointer)
            return True

    def close_checkpointer(self) -> None:
        """Waits for a running checkpoint; afterwards none starts again."""
        with self._checkpointer_lock:
            conn, self._checkpointer = self._checkpointer, None
            header, self._checkpointer_header = self._checkpointer_header, None
            if header is not None:
                header.close()
            if conn is not None:
                conn.close()


def _savepoint(
    conn: apsw.Connection,
    cur: apsw.Cursor,
    fn: Callable[..., Any],
    args: tuple,
    kwargs: Mapping[str, Any],
) -> outcome.Outcome:
    cur.execute("SAVEPOINT request")
    try:
        value = fn(conn, *args, **kwargs)
    except Exception as exc:
        cur.execute("ROLLBACK TO request")
        cur.execute("RELEASE request")
        return outcome.Error(exc)
    cur.execute("RELEASE request")
    return outcome.Value(value)


def passive_checkpoint(conn: apsw.Connection) -> tuple[int, int] | None:
    """(WAL frames, frames checkpointed), or None when another connection is
    checkpointing right now (SQLite runs one at a time); nothing is lost then."""
    try:
        return conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    except apsw.BusyError:
        return None
