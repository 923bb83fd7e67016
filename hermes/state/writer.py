"""The DbWriter actor: the only writer of one database file in this process.

Group commit: the actor takes every request waiting in its mailbox (up to
`batch_max`) and hands them to its WriterCore as one batch: one transaction,
a savepoint per request, one commit, then every caller is answered. A write
is acknowledged only after its commit. A write is any callable of a
connection: `Write(fn, args, kwargs)`, closures and lambdas included.

Blocking SQLite work never runs on the Trio thread: the core runs on a
worker thread, one call at a time (the commit lane), and background PASSIVE
checkpoints run on a second lane with the core's second connection, while
batches keep committing. A checkpoint starts when the WAL passes
CHECKPOINT_PAGES and periodically; the last one runs at close. A batch that
fails as a whole (not one request in it) crashes the writer, which answers
every caller of that batch with ActorStopped; its generation is then never
lent again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import outcome
import trio

from hermes.actors.batch import BatchActor
from hermes.state.writer_core import WriterCore

log = logging.getLogger(__name__)

WAL_WARN_BYTES = 256 * 1024 * 1024
CHECKPOINT_INTERVAL = 60.0
CHECKPOINT_PAGES = 1000  # SQLite's own automatic threshold, moved off the commit path

_warned_wal: set[str] = set()  # one WAL-growth warning per database per process


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
        self.core = WriterCore(path)
        self.checkpoints = 0  # background checkpoints run, for stats
        self._on_retired = on_retired
        self._checkpoint_interval = checkpoint_interval
        self._commit_lane = trio.CapacityLimiter(1)
        self._checkpoint_lane = trio.CapacityLimiter(1)
        self._checkpointing = False
        self._checkpointer_closed = False

    async def _on_lane(self, lane: trio.CapacityLimiter, fn: Callable[..., Any], *args: Any) -> Any:
        # Not abandoned on cancel: a caller is answered only after the thread's work
        # is done, so a write that committed is never reported as failed.
        return await trio.to_thread.run_sync(fn, *args, limiter=lane)

    # -- life cycle -----------------------------------------------------------

    async def on_start(self) -> None:
        await self._on_lane(self._commit_lane, self.core.open)
        self.nursery.start_soon(self._checkpoint_periodically)

    async def flush(self) -> None:
        """Drain phase 3: close the checkpointer, then a PASSIVE checkpoint (never for
        a retired file) and close."""
        await self._close_checkpointer()
        await self._on_lane(self._commit_lane, self.core.close, True)

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await super().run(task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):  # crashed or cancelled before flush closed it
                if self.core.is_open:
                    await self._close_checkpointer()
                    await self._on_lane(self._commit_lane, self.core.close, False)

    # -- batches ----------------------------------------------------------------

    async def handle_batch(self, msgs: list[Any]) -> list[outcome.Outcome]:
        was_retired = self.core.retired
        results = await self._on_lane(self._commit_lane, self.core.batch, msgs)
        if self.core.retired is not None and was_retired is None:
            self._checkpointer_closed = True  # the core closed it when it retired
            self._on_retired(self.core.retired)
        elif self.core.wal_pages >= CHECKPOINT_PAGES:
            self._start_checkpoint()
        return results

    # -- checkpoints and WAL health -------------------------------------------

    def _start_checkpoint(self) -> None:
        if not self._checkpointing and not self._checkpointer_closed:
            self._checkpointing = True
            self.nursery.start_soon(self._checkpoint_in_background)

    async def _checkpoint_in_background(self) -> None:
        try:
            ran = await self._on_lane(self._checkpoint_lane, self.core.checkpoint)
        except Exception as exc:  # a checkpoint only saves work later; the writes are safe
            log.warning("%s: a background checkpoint failed: %s", self.path, exc)
            ran = False
        finally:
            self._checkpointing = False
        if ran:
            self.checkpoints += 1
            self._warn_if_wal_grows()

    async def _close_checkpointer(self) -> None:
        self._checkpointer_closed = True
        await self._on_lane(self._checkpoint_lane, self.core.close_checkpointer)

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
        while not self._checkpointer_closed:
            await trio.sleep(self._checkpoint_interval)
            self._start_checkpoint()
