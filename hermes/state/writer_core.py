"""The writer's SQLite side: its requests and the code that runs them.

A DbWriter actor owns one WriterCore, which lives in the writer's own child
process (see writer_process) so that SQLite work never competes with the
Trio thread for the GIL. Everything here is plain blocking code.

Group commit: a batch runs in one BEGIN IMMEDIATE transaction, each request
inside its own SAVEPOINT so a failing request fails alone, and commits once.
Checkpoints never run on the commit path: SQLite's automatic checkpoint is
replaced by a WAL hook that records the WAL's size, and a PASSIVE checkpoint
runs on a second connection, on the core's checkpoint lane, while batches
keep committing. Before each batch the core checks that the path still
names the file it opened (device, inode and the stamp in the header); if
not, it retires: every later request fails with StateDbReplacedError and it
closes its connection without checkpointing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
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
from hermes.state.errors import SessionNotFound, StateDbReplacedError, StateError
from hermes.state.messages import NewMessage, append_message, append_messages
from hermes.state.sessions import add_tokens, add_tokens_to_sessions

log = logging.getLogger("hermes.state.writer")  # the parent logs these under that name

BUSY_RETRIES = 6  # each waits up to the connection's busy timeout (10 s)


@attrs.frozen
class Write:
    """Run `fn(conn, *args)` inside the writer's transaction; its return value is the reply."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@attrs.frozen
class Append:
    """Append one message and add what it cost to its session; replies its row id.

    Appends that follow one another in a batch go in together, as one
    `append_messages` call; if that fails, each is retried alone, so a bad one
    fails by itself.
    """

    message: NewMessage
    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class AddTokens:
    """A token-count delta; deltas for one session in one batch become one UPDATE."""

    session_id: str
    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class CheckIdentity:
    """Reply True while the path still names the opened file; retire (and reply False) if not."""


@attrs.frozen
class Checkpoint:
    """Run a PASSIVE checkpoint now; replies (wal_frames, checkpointed_frames) or None if busy."""


@attrs.frozen
class Status:
    """What the actor needs to know of its core after each request."""

    retired: str | None
    wal_pages: int
    batches: int


class WriterCore:
    """The write connection of one file and its checkpointer connection.

    `batch`, `open` and `close` run on one lane (one thread), `checkpoint`
    and `close_checkpointer` on another, so a checkpoint never holds up a
    commit.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.retired: str | None = None
        self.batches = 0
        self._conn: apsw.Connection | None = None
        self._header: HeaderReader | None = None
        self._identity: FileIdentity | None = None
        self._stamp = 0
        self._stamp_on_disk = False
        self._wal_pages = 0  # after the last commit, from the WAL hook
        self._checkpointer: apsw.Connection | None = None
        self._checkpointer_header: HeaderReader | None = None
        self._checkpointer_lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def status(self) -> Status:
        return Status(self.retired, self._wal_pages, self.batches)

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
        deltas: dict[str, list[Any]] = {}
        appends: list[int] = []  # indexes of the Appends not yet run, in order
        conn.execute("BEGIN IMMEDIATE")
        try:
            for i, msg in enumerate(msgs):
                kind = type(msg)
                if kind is Append:
                    appends.append(i)
                    continue
                if kind is AddTokens:  # token deltas commute with everything: applied last
                    _add_delta(deltas, msg.session_id, msg.input_tokens, msg.output_tokens, i)
                    continue
                self._append_all(conn, cur, msgs, appends, results, deltas)  # keep the order
                if kind is Write:
                    results[i] = self._savepoint(conn, cur, msg.fn, msg.args)
                elif kind is CheckIdentity:
                    results[i] = outcome.Value(True)
                elif kind is Checkpoint:
                    results[i] = outcome.Value(None)  # answered after the commit
                else:
                    results[i] = outcome.Error(TypeError(f"DbWriter cannot handle {msg!r}"))
            self._append_all(conn, cur, msgs, appends, results, deltas)
            self._add_all_tokens(conn, cur, deltas, results)
            conn.execute("COMMIT")
        except BaseException:
            if not conn.in_transaction:
                raise
            conn.execute("ROLLBACK")
            raise
        self.batches += 1
        for i, msg in enumerate(msgs):
            if type(msg) is Checkpoint:
                results[i] = outcome.capture(self._checkpoint_sync)
        return results

    def _add_all_tokens(
        self,
        conn: apsw.Connection,
        cur: apsw.Cursor,
        deltas: dict[str, list[Any]],
        results: list[outcome.Outcome | None],
    ) -> None:
        """One UPDATE for every session's tokens; if a session is missing, one each."""
        if not deltas:
            return
        sums = {session_id: (inp, out) for session_id, (inp, out, _) in deltas.items()}
        together = self._savepoint(conn, cur, add_tokens_to_sessions, (sums,))
        for session_id, (inp, out, indexes) in deltas.items():
            merged = together
            if isinstance(together, outcome.Error):
                merged = self._savepoint(conn, cur, add_tokens, (session_id, inp, out))
            for i in indexes:  # an outcome is unwrapped once: one of its own per caller
                if isinstance(merged, outcome.Value):
                    results[i] = outcome.Value(None)
                else:
                    results[i] = outcome.Error(SessionNotFound(session_id))

    def _append_all(
        self,
        conn: apsw.Connection,
        cur: apsw.Cursor,
        msgs: list[Any],
        appends: list[int],
        results: list[outcome.Outcome | None],
        deltas: dict[str, list[Any]],
    ) -> None:
        """Run the waiting Appends as one call; if it fails, one at a time."""
        if not appends:
            return
        messages = [msgs[i].message for i in appends]
        together = self._savepoint(conn, cur, append_messages, (messages,))
        for n, i in enumerate(appends):
            msg = msgs[i]
            if isinstance(together, outcome.Value):
                results[i] = outcome.Value(together.value[n])
            else:
                results[i] = self._savepoint(conn, cur, append_message, (msg.message,))
            if isinstance(results[i], outcome.Value) and (msg.input_tokens or msg.output_tokens):
                _add_delta(deltas, msg.message.session_id, msg.input_tokens, msg.output_tokens)
        appends.clear()

    @staticmethod
    def _savepoint(
        conn: apsw.Connection, cur: apsw.Cursor, fn: Callable[..., Any], args: tuple
    ) -> outcome.Outcome:
        cur.execute("SAVEPOINT request")
        try:
            value = fn(conn, *args)
        except Exception as exc:
            cur.execute("ROLLBACK TO request")
            cur.execute("RELEASE request")
            return outcome.Error(exc)
        cur.execute("RELEASE request")
        return outcome.Value(value)

    # -- checkpoints ------------------------------------------------------------

    def _wal_grew(self, conn: apsw.Connection, name: str, pages: int) -> int:
        self._wal_pages = pages
        return apsw.SQLITE_OK

    def _checkpoint_sync(self) -> tuple[int, int] | None:
        """The explicit Checkpoint message: on the writer's connection, after its commit."""
        if self.retired is not None or self._conn is None:
            raise self._replaced()
        return passive_checkpoint(self._conn)

    def checkpoint(self) -> bool:
        """A background checkpoint on the second connection; False if none ran
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


def _add_delta(
    deltas: dict[str, list[Any]], session_id: str, inp: int, out: int, index: int | None = None
) -> None:
    """Merge a token delta into the batch's per-session sums; `index`: the request
    that is answered by the merged update (an Append's answer is its row id)."""
    entry = deltas.setdefault(session_id, [0, 0, []])
    entry[0] += inp
    entry[1] += out
    if index is not None:
        entry[2].append(index)


def passive_checkpoint(conn: apsw.Connection) -> tuple[int, int] | None:
    """(WAL frames, frames checkpointed), or None when another connection is
    checkpointing right now (SQLite runs one at a time); nothing is lost then."""
    try:
        return conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    except apsw.BusyError:
        return None
