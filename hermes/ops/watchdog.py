"""The event loop's pulse: lag measured all the time, a freeze ends the process.

A task sleeps a short tick and records how late it woke (the lag /metrics shows)
and when (the pulse). A thread outside the loop watches the pulse: a loop blocked
for longer than `ops.freeze_seconds` (a sync call that never returns, a deadlock
in a C library) cannot be fixed from inside, so the thread logs every thread's
and every Trio task's stack and exits 75, and the service manager starts a fresh
serve. Every 5 minutes the RSS, open sessions and outbox depth go to the log, so
months of memory and backlog can be read back.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import psutil
import trio

from hermes.actors.actor import Actor
from hermes.actors.snapshot import Snapshot
from hermes.delivery.outbox_store import depth
from hermes.ops.readiness import find
from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

TICK = 0.25
STATS_EVERY = 300.0
FROZEN = 75  # EX_TEMPFAIL, as `hermes serve` when busy: the service manager restarts it
FREEZE_HOOK = "HERMES_TEST_FREEZE_AFTER"  # tests: block the loop this many seconds after start


def task_stacks(root: trio.lowlevel.Task) -> list[str]:
    """Every Trio task under `root` with where it waits, for a frozen loop's log (read
    from another thread while the loop is stuck, so nothing moves under it)."""
    out = []
    todo = [root]
    while todo:
        task = todo.pop()
        stack = traceback.StackSummary.extract(task.iter_await_frames())
        out.append(f"task {task.name}:\n" + "".join(stack.format()))
        todo.extend(t for n in task.child_nurseries for t in n.child_tasks)
    return out


def thread_stacks() -> list[str]:
    names = {t.ident: t.name for t in threading.enumerate()}
    return [
        f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    ]


class LoopWatch(Actor):
    """Its ready handle is itself: the operator surfaces read `lag` from it."""

    def __init__(
        self,
        freeze_seconds: float,
        tree: Callable[[], Snapshot],
        registry: Registry,
        state_db: Path,
        exit: Callable[[int], Any] = os._exit,
    ) -> None:
        super().__init__()
        self.freeze_seconds = freeze_seconds
        self.tree = tree
        self.lag = 0.0
        self._peak = 0.0  # the worst lag since /metrics last asked
        self._db = Db(registry, state_db)
        self._pulse = time.monotonic()
        self._stopped = threading.Event()
        self._exit = exit

    def ready_handle(self) -> LoopWatch:
        return self

    def take_peak(self) -> float:
        """The worst lag since the last call (a scrape every 15 s sees the spikes)."""
        peak, self._peak = max(self._peak, self.lag), 0.0
        return peak

    async def on_start(self) -> None:
        await self.exits.enter_async_context(self._db)
        self.exits.callback(self._stopped.set)
        tasks = trio.lowlevel.current_root_task()
        threading.Thread(
            target=self._watch, args=(tasks,), name="freeze-watch", daemon=True
        ).start()
        self.nursery.start_soon(self._beat)
        self.nursery.start_soon(self._stats)
        after = os.environ.get(FREEZE_HOOK)
        if after:
            self.nursery.start_soon(self._freeze, float(after))

    async def _beat(self) -> None:
        while True:
            before = trio.current_time()
            await trio.sleep(TICK)
            self.lag = max(0.0, trio.current_time() - before - TICK)
            self._peak = max(self._peak, self.lag)
            self._pulse = time.monotonic()

    def _watch(self, tasks: trio.lowlevel.Task | None) -> None:
        """The thread: exit 75 once the pulse is older than the freeze limit. A wait of
        its own that overslept (the whole process was stopped: SIGSTOP, a paused VM)
        says nothing about the loop; the next look does."""
        every = min(1.0, self.freeze_seconds / 4)
        while True:
            before = time.monotonic()
            if self._stopped.wait(every):
                return
            woke = time.monotonic()
            frozen = woke - self._pulse
            if frozen > self.freeze_seconds and woke - before < every + self.freeze_seconds / 2:
                self._die(frozen, tasks)
                return

    def _die(self, frozen: float, tasks: trio.lowlevel.Task | None) -> None:
        """Log the stacks and exit; if logging itself hangs (the loop may be frozen in a
        write to a full pipe, holding the handler's lock), exit anyway."""
        threading.Timer(5.0, self._exit, (FROZEN,)).start()
        try:
            stacks = thread_stacks() + (task_stacks(tasks) if tasks else [])
            log.critical(
                "event loop frozen for %.1f s (ops.freeze_seconds %g); exiting %d so the"
                " service restarts. Stacks:\n%s",
                frozen,
                self.freeze_seconds,
                FROZEN,
                "\n".join(stacks),
            )
            for handler in logging.getLogger().handlers:
                handler.flush()
        finally:
            self._exit(FROZEN)

    async def _stats(self) -> None:
        proc = psutil.Process()
        while True:
            await trio.sleep(STATS_EVERY)
            gateway = find(self.tree(), "gateway")
            try:
                pending, _ = await self._db.read(depth)
            except (StateError, apsw.Error) as exc:  # the line still goes out
                pending = f"? ({exc})"
            log.info(
                "rss=%.1f MB open_sessions=%s outbox_depth=%s loop_lag=%.3f s",
                proc.memory_info().rss / 2**20,
                gateway.detail.get("sessions", 0) if gateway else 0,
                pending,
                self.lag,
            )

    async def _freeze(self, after: float) -> None:
        await trio.sleep(after)
        log.warning("%s: blocking the event loop (a test hook)", FREEZE_HOOK)
        time.sleep(10**6)  # noqa: ASYNC251 (the point: a loop that never wakes)
