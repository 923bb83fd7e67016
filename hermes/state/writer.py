"""The DbWriter actor: the only write connection to one database file in this process.

Group commit: the actor takes every request waiting in its mailbox (up to
`batch_max`), runs them in one BEGIN IMMEDIATE transaction, each inside its
own SAVEPOINT so a failing request fails alone, commits once, then answers
every caller. A write is acknowledged only after its commit. All SQLite work
runs in a worker thread, one batch per thread hop, never on the Trio thread.

Checkpoints never run on the commit path: SQLite's automatic checkpoint (which
stalls the committing batch for milliseconds while it copies pages) is
replaced by a PASSIVE checkpoint on the writer's own second connection, in
its own thread, started when the WAL passes CHECKPOINT_PAGES and
periodically; batches keep committing while it runs.

Before each batch the writer checks that the path still names the file it
opened (device, inode and the stamp in the header). If not, it retires: the
batch and every later request fail with StateDbReplacedError, it closes its
connection without checkpointing, and it never writes again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import attrs
import outcome
import trio

from hermes.actors.batch import BatchActor
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

log = logging.getLogger(__name__)

WAL_WARN_BYTES = 256 * 1024 * 1024
CHECKPOINT_INTERVAL = 60.0
CHECKPOINT_PAGES = 1000  # SQLite's own automatic threshold, moved off the commit path
BUSY_RETRIES = 6  # each waits up to the connection's busy timeout (10 s)

_warned_wal: set[str] = set()  # one WAL-growth warning per database per process


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


class DbWriter(BatchActor):
    mailbox_size = 128
    batch_max = 256

    def __init__(
        self,
        path: Path,
        on_retired: Callable[[str], None] = lambda why: None,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
    ) -> None:
        super().__init__(f"writer:{path}")
        self.path = path
        self.retired: str | None = None
        self.batches = 0  # committed transactions, for tests and stats
        self._on_retired = on_retired
        self._checkpoint_interval = checkpoint_interval
        self._conn: apsw.Connection | None = None
        self._header: HeaderReader | None = None
        self._identity: FileIdentity | None = None
        self._stamp = 0
        self._stamp_on_disk = False
        self._limiter = trio.CapacityLimiter(1)
        self._wal_pages = 0  # after the last commit, from the WAL hook
        self._checkpointer: apsw.Connection | None = None  # used only on its own thread
        self._checkpointer_header: HeaderReader | None = None
        self._checkpointer_limiter = trio.CapacityLimiter(1)
        self._checkpointing = False
        self._checkpointer_closed = False
        self.checkpoints = 0  # background checkpoints run, for tests and stats
        self._checkpointed = trio.Event()

    # -- life cycle -----------------------------------------------------------

    async def on_start(self) -> None:
        await self._in_thread(self._open_sync)
        self.nursery.start_soon(self._checkpoint_periodically)

    async def flush(self) -> None:
        """Drain phase 3: a PASSIVE checkpoint (never for a retired file), then close."""
        await self._close_checkpointer()
        await self._in_thread(self._close_sync, True)

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await super().run(task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):  # crashed or cancelled before flush closed it
                await self._close_checkpointer()
                if self._conn is not None:
                    await self._in_thread(self._close_sync, False)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    def _open_sync(self) -> None:
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
            self._close_checkpointer_sync()
            conn.close()
            raise
        self._conn = conn

    def _close_sync(self, checkpoint: bool) -> None:
        conn, self._conn = self._conn, None
        if self._header is not None:
            self._header.close()
            self._header = None
        if conn is None:
            return
        if self.retired is not None:
            # Closing must not checkpoint stale WAL frames into whatever the path is now.
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

    def _retire_sync(self, why: str) -> None:
        self.retired = why
        log.error("state db %s was replaced (%s); this generation is retired", self.path, why)
        self._close_sync(False)

    def _replaced(self) -> StateDbReplacedError:
        return StateDbReplacedError(str(self.path), self.retired or "retired")

    # -- batches ----------------------------------------------------------------

    async def handle_batch(self, msgs: list[Any]) -> list[outcome.Outcome]:
        was_retired = self.retired
        results = await self._in_thread(self._batch_sync, msgs)
        if self.retired is not None and was_retired is None:
            await self._close_checkpointer()  # before anyone learns the file was replaced
            self._on_retired(self.retired)
        elif self._wal_pages >= CHECKPOINT_PAGES:
            self._start_checkpoint()
        return results

    def _batch_sync(self, msgs: list[Any]) -> list[outcome.Outcome]:
        if self.retired is None and self._conn is not None:
            why = self._replaced_why(self._header)
            if why is not None:
                self._retire_sync(why)
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
                    entry = deltas.setdefault(msg.session_id, [0, 0, []])
                    entry[0] += msg.input_tokens
                    entry[1] += msg.output_tokens
                    entry[2].append(i)
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
                entry = deltas.setdefault(msg.message.session_id, [0, 0, []])
                entry[0] += msg.input_tokens
                entry[1] += msg.output_tokens
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

    # -- checkpoints and WAL health -------------------------------------------

    def _wal_grew(self, conn: apsw.Connection, name: str, pages: int) -> int:
        self._wal_pages = pages
        return apsw.SQLITE_OK

    def _checkpoint_sync(self) -> tuple[int, int] | None:
        """The explicit Checkpoint message: on the writer's connection, after its commit."""
        if self.retired is not None or self._conn is None:
            raise self._replaced()
        frames = passive_checkpoint(self._conn)
        self._warn_if_wal_grows()
        return frames

    def _start_checkpoint(self) -> None:
        if not self._checkpointing and self.retired is None and not self._checkpointer_closed:
            self._checkpointing = True
            self.nursery.start_soon(self._checkpoint_in_background)

    async def _checkpoint_in_background(self) -> None:
        try:
            await trio.to_thread.run_sync(
                self._background_checkpoint_sync, limiter=self._checkpointer_limiter
            )
        except apsw.Error as exc:  # a checkpoint only saves work later; the writes are safe
            log.warning("%s: a background checkpoint failed: %s", self.path, exc)
        finally:
            self._checkpointing = False
        self.checkpoints += 1
        self._checkpointed.set()
        self._checkpointed = trio.Event()

    async def wait_checkpoint(self) -> None:
        """Until the next background checkpoint has run."""
        await self._checkpointed.wait()

    def _background_checkpoint_sync(self) -> None:
        """On the checkpointer's thread: never for a replaced file, never after close."""
        if self.retired is not None or self._checkpointer_closed:
            return
        if self._checkpointer is None or self._replaced_why(self._checkpointer_header):
            return  # the next batch's identity check retires the writer
        passive_checkpoint(self._checkpointer)
        self._warn_if_wal_grows()

    async def _close_checkpointer(self) -> None:
        """Waits for a running checkpoint; afterwards none starts again."""
        self._checkpointer_closed = True
        await trio.to_thread.run_sync(self._close_checkpointer_sync,
                                      limiter=self._checkpointer_limiter)  # fmt: skip

    def _close_checkpointer_sync(self) -> None:
        conn, self._checkpointer = self._checkpointer, None
        header, self._checkpointer_header = self._checkpointer_header, None
        if header is not None:
            header.close()
        if conn is not None:
            conn.close()

    def _warn_if_wal_grows(self) -> None:
        try:
            size = os.stat(f"{self.path}-wal").st_size
        except FileNotFoundError:
            return
        key = str(self.path)
        if size > WAL_WARN_BYTES and key not in _warned_wal:
            _warned_wal.add(key)
            log.warning(
                "%s: the WAL has grown to %d MB and checkpoints are not shrinking it; "
                "a long-lived reader in another process may be holding it open",
                key,
                size // (1024 * 1024),
            )

    async def _checkpoint_periodically(self) -> None:
        while self.retired is None and not self._checkpointer_closed:
            await trio.sleep(self._checkpoint_interval)
            self._start_checkpoint()


def passive_checkpoint(conn: apsw.Connection) -> tuple[int, int] | None:
    """(WAL frames, frames checkpointed), or None when another connection is
    checkpointing right now (SQLite runs one at a time); nothing is lost then."""
    try:
        return conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    except apsw.BusyError:
        return None
