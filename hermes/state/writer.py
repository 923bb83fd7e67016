"""The DbWriter actor: the only writer of one database file in this process.

Group commit: the actor takes every request waiting in its mailbox (up to
`batch_max`) and hands them to its WriterCore as one batch: one transaction,
a savepoint per request, one commit, then every caller is answered. A write
is acknowledged only after its commit.

The core runs in a child process the actor starts and owns (see
writer_process for why not a thread). A write function therefore travels
by reference: it must be a function of an importable module (or a
functools.partial of one), and its arguments and result must pickle. The
child imports a function's module the first time it meets it; `preload`
names modules to import before the writer reports ready, so that no first
write waits for an import. If the child dies, the actor crashes with it; its
generation is then never lent again, and the next acquire opens a new one.

Checkpoints never run on the commit path: when the WAL passes
CHECKPOINT_PAGES, and periodically, the actor asks the core for a PASSIVE
checkpoint on its second connection, which runs while batches keep
committing.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import outcome
import trio

from hermes.actors.batch import BatchActor
from hermes.actors.reply import Reply
from hermes.state.errors import StateError
from hermes.state.writer_core import Checkpoint, Status
from hermes.state.writer_process import FrameReader, frame, unpack

log = logging.getLogger(__name__)

WAL_WARN_BYTES = 256 * 1024 * 1024
CHECKPOINT_INTERVAL = 60.0
CHECKPOINT_PAGES = 1000  # SQLite's own automatic threshold, moved off the commit path
CLOSE_TIMEOUT = 30.0

_warned_wal: set[str] = set()  # one WAL-growth warning per database per process


class WriterProcessDied(StateError):
    """The writer's child process ended without being asked to."""


class Unsendable(StateError):
    """A write that cannot travel to the writer's process: its function is not one
    of an importable module, or an argument does not pickle."""


def _portable_request(msg: Any) -> bytes:
    """`msg` pickled for the writer's process, or Unsendable saying why it cannot go."""
    fn = getattr(msg, "fn", None)
    problem = None
    if getattr(fn, "__module__", None) == "__main__":
        problem = "it is defined in __main__, which the writer's process does not run"
    else:
        try:
            return pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            problem = f"it does not pickle: {exc}"
    what = f"write {getattr(fn, '__qualname__', fn)!r}" if fn is not None else repr(msg)
    raise Unsendable(
        f"{what} cannot be sent to the writer's process ({problem}); use a function of "
        "an importable module (or functools.partial of one) with arguments that pickle"
    )


class DbWriter(BatchActor):
    mailbox_size = 128
    batch_max = 256

    def __init__(
        self,
        path: Path,
        on_retired: Callable[[str], None] = lambda why: None,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
        preload: Sequence[str] = (),
    ) -> None:
        super().__init__(f"writer:{path}")
        self.preload = tuple(preload)
        self.path = path
        self.retired: str | None = None
        self.batches = 0  # committed transactions, for tests and stats
        self.checkpoints = 0  # background checkpoints run, for tests and stats
        self._on_retired = on_retired
        self._checkpoint_interval = checkpoint_interval
        self._wal_pages = 0
        self._process: trio.Process | None = None
        self._ids = itertools.count()
        self._waiting: dict[int, Reply] = {}
        self._send_lock = trio.Lock()
        self._checkpointing = False
        self._checkpointer_closed = False
        self._checkpointed = trio.Event()
        self._closed = False  # the core closed its file (flush)
        self._stopping = False  # the child is being told to exit
        self._gone = False  # its replies have ended: it exited
        self._replies: trio.Nursery | None = None

    # -- life cycle -----------------------------------------------------------

    async def on_start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        argv = [sys.executable, "-m", "hermes.state.writer_process", str(self.path), *self.preload]
        self._process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
        )  # its own session: a terminal's Ctrl-C reaches serve, which drains, not the writer
        self._replies.start_soon(self._read_replies, self._process)
        await self._core("main", "open")
        self.nursery.start_soon(self._checkpoint_periodically)

    async def flush(self) -> None:
        """Drain phase 3: a PASSIVE checkpoint (never for a retired file), then close."""
        self._checkpointer_closed = True
        await self._core("main", "close", True)
        self._closed = True

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        # Replies are read outside the actor's nursery, shielded: a drain that cancels
        # the actor must not stop them while flush waits for the last one.
        try:
            async with trio.open_nursery() as self._replies:
                try:
                    await super().run(task_status=task_status)
                finally:
                    with trio.CancelScope(shield=True):  # also when it crashed or was cancelled
                        await self._stop_process()
        except BaseExceptionGroup as group:  # a crash keeps its own type, as Actor.run's does
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        self._stopping = True
        with trio.move_on_after(CLOSE_TIMEOUT):
            if not self._closed:  # crashed or cancelled before flush: close, no checkpoint
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    async with self._send_lock:  # nobody reads the reply any more
                        await process.stdin.send_all(frame((-1, "main", "close", (False,))))
            await process.stdin.aclose()  # after its last request: the child exits
            await process.wait()
        if process.returncode is None:
            log.error("%s: the writer process did not exit; killing it", self.path)
            process.kill()
            await process.wait()

    # -- talking to the core --------------------------------------------------

    async def _core(self, lane: str, method: str, *args: Any) -> Any:
        """Run `method(*args)` on the core in the child, on `lane`; returns its value
        (for "batch", the (ok, pickle) answer of each request)."""
        if self._process is None or self._gone:
            raise WriterProcessDied(f"{self.path}: the writer process is gone")
        req_id = next(self._ids)
        data = frame((req_id, lane, method, args))
        self._waiting[req_id] = reply = Reply()
        # Shielded, as a call into a worker thread is: a frame half sent would garble
        # the stream, and a caller answered only after the child's commit never learns
        # too early that its write "failed" when it may have committed.
        with trio.CancelScope(shield=True):
            try:
                async with self._send_lock:
                    await self._process.stdin.send_all(data)
                ok, value, status = await reply.wait()
            finally:
                self._waiting.pop(req_id, None)
                reply.abandon()
        self._apply(status)
        if method == "batch" and ok:
            return value  # None, or the (ok, pickle) answer of each request
        return unpack(ok, value).unwrap()

    async def _read_replies(self, process: trio.Process) -> None:
        """Until the child exits (its stdout ends); it dying uninvited crashes the actor."""
        reader = FrameReader()
        with trio.CancelScope(shield=True):
            while chunk := await process.stdout.receive_some(1 << 16):
                for req_id, ok, value, status, logs in reader.feed(chunk):
                    for name, level, message in logs:
                        logging.getLogger(name).log(level, "%s", message)
                    reply = self._waiting.pop(req_id, None)
                    if reply is not None:  # None: its caller was cancelled meanwhile
                        reply.set((ok, value, status))
        self._gone = True
        gone = WriterProcessDied(f"{self.path}: the writer process has exited")
        for reply in self._waiting.values():  # no answer will come
            reply.fail(gone)
        self._waiting.clear()
        if not self._stopping:
            raise WriterProcessDied(f"{self.path}: the writer process exited unexpectedly")

    def _apply(self, status: Status) -> None:
        self.retired = status.retired
        self._wal_pages = status.wal_pages
        self.batches = status.batches

    # -- batches ----------------------------------------------------------------

    async def handle_batch(self, msgs: list[Any]) -> list[outcome.Outcome]:
        checkpoint = any(type(m) is Checkpoint for m in msgs)  # then see whether the WAL shrank
        try:  # the usual case: the whole batch in one pickle
            whole: bytes | None = pickle.dumps(msgs, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            whole = None
        if whole is not None:
            results = await self._batch(whole, checkpoint)
            if results is not None:
                return results
        # One pickle each, so that one that cannot travel (or that the child cannot
        # load) fails alone; the child ran nothing of a batch it could not load.
        blobs, failed = [], {}
        for i, msg in enumerate(msgs):
            try:
                blobs.append(_portable_request(msg))
            except Unsendable as exc:
                failed[i] = outcome.Error(exc)
        results = iter(await self._batch(blobs, checkpoint) if blobs else [])
        return [failed[i] if i in failed else next(results) for i in range(len(msgs))]

    async def _batch(
        self, payload: bytes | list[bytes], checkpoint: bool
    ) -> list[outcome.Outcome] | None:
        """`payload`: the batch in one pickle (None back if the child cannot load it),
        or one pickle per request."""
        was_retired = self.retired
        results = await self._core("main", "batch", payload)
        if results is None:
            return None
        if self.retired is not None and was_retired is None:
            self._checkpointer_closed = True  # the core closed it before answering
            self._on_retired(self.retired)
        elif self._wal_pages >= CHECKPOINT_PAGES:
            self._start_checkpoint()
        if checkpoint:
            self._warn_if_wal_grows()
        return [unpack(ok, blob) for ok, blob in results]

    # -- checkpoints and WAL health -------------------------------------------

    def _start_checkpoint(self) -> None:
        if not self._checkpointing and self.retired is None and not self._checkpointer_closed:
            self._checkpointing = True
            self.nursery.start_soon(self._checkpoint_in_background)

    async def _checkpoint_in_background(self) -> None:
        try:
            ran = await self._core("checkpoint", "checkpoint")
        except Exception as exc:  # a checkpoint only saves work later; the writes are safe
            log.warning("%s: a background checkpoint failed: %s", self.path, exc)
            ran = False
        finally:
            self._checkpointing = False
        if ran:
            self._warn_if_wal_grows()
        self.checkpoints += 1
        self._checkpointed.set()
        self._checkpointed = trio.Event()

    async def wait_checkpoint(self) -> None:
        """Until the next background checkpoint has run."""
        await self._checkpointed.wait()

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
