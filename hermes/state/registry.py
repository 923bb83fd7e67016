"""The registry: one live generation per database path in this process.

`acquire(path)` returns the live generation for the resolved path, opening it
once however many tasks ask at the same moment; `release(gen)` is the only
way to let go, and the final release checkpoints and closes it. Acquisitions
of one path wait for each other; other paths are never held up. A generation
whose file was replaced is retired: never lent again, kept for its holders
until they release it, and the next acquire opens the new file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw
import attrs
import trio

from hermes.actors.errors import ActorStopped
from hermes.actors.snapshot import Snapshot
from hermes.actors.supervisor import ChildSpec, Restart, Supervisor
from hermes.state.errors import StateError
from hermes.state.generation import Generation
from hermes.state.readpool import ReadPool
from hermes.state.writer import DbWriter

log = logging.getLogger(__name__)

DRAIN_DEADLINE = 30.0


def resolve(path: os.PathLike[str] | str) -> Path:
    """One spelling per file: symlinks and '..' resolved."""
    return Path(os.path.realpath(path))


def _discard_stale_wal(path: Path) -> None:
    """After a replacement, the -wal and -shm beside the path belong to the old file.

    Left there, SQLite would replay the old file's pages into the new one. Our
    own connections to the old file are closed by now (the retired writer
    closed its own without checkpointing; the registry closed its readers).
    """
    for suffix in ("-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
            log.warning("removed %s%s left over from the replaced database", path, suffix)
        except FileNotFoundError:
            pass


class Registry:
    """Hosts every DbWriter of the process under one supervisor; a child of the serve tree.

    `keep_open` paths are acquired before it reports ready (so a database that
    cannot be opened stops serve from starting) and released when it drains.
    """

    kind = "Registry"

    def __init__(
        self,
        keep_open: Iterable[Path] = (),
        checkpoint_interval: float = 60.0,
        preload: Sequence[str] = (),
    ) -> None:
        """`preload`: modules of write functions each writer's process imports at once
        (see DbWriter)."""
        self.name = "state"
        self._keep_open = [Path(p) for p in keep_open]
        self._checkpoint_interval = checkpoint_interval
        self._preload = tuple(preload)
        self._sup = Supervisor("writers", max_restarts=1000, period=1.0)
        self._live: dict[Path, Generation] = {}
        self._generations: set[Generation] = set()
        self._locks: dict[Path, trio.Lock] = {}
        self._closing: dict[Path, trio.Event] = {}
        self._numbers = 0
        self._held: list[Generation] = []
        self._closed_all = False
        self._drain = trio.Event()
        self._running = False

    # -- the Child protocol -------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Registry] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self._sup.run)
            self._running = True
            try:
                for path in self._keep_open:
                    self._held.append(await self.acquire(path))
                task_status.started(self)
                await self._drain.wait()
            finally:
                self._running = False
                with trio.CancelScope(shield=True):  # each writer's flush is bounded
                    await self.close_all()
                self._sup.request_drain(trio.current_time())

    def stop_intake(self) -> None:
        """Writers keep taking writes until the registry itself is stopped (it stops last)."""

    def request_drain(self, deadline: float) -> None:
        self._drain.set()

    def snapshot(self) -> Snapshot:
        snap = self._sup.snapshot()
        return attrs.evolve(snap, name=self.name, kind=self.kind)

    # -- acquire / release ----------------------------------------------------------

    async def acquire(self, path: os.PathLike[str] | str) -> Generation:
        """The live generation for `path`, opened if need be; pair with `release`."""
        if not self._running:
            raise ActorStopped(self.name)
        key = resolve(path)
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            gen = self._live.get(key)
            if gen is not None and await gen.same_file():
                gen.refs += 1
                return gen
            if gen is not None:  # retired (or its writer died): never lent again
                del self._live[key]
                await gen.reads.close()
                if gen.retired is not None:
                    _discard_stale_wal(key)
            closing = self._closing.get(key)
            if closing is not None:
                await closing.wait()
            gen = await self._open(key)  # on failure nothing is left behind for this path
            gen.refs = 1
            self._live[key] = gen
            self._generations.add(gen)
            return gen

    async def release(self, gen: Generation) -> None:
        """Let go of one acquisition; the last one checkpoints and closes the generation."""
        if self._closed_all and gen not in self._generations:
            return  # already torn down by close_all at shutdown
        if gen.refs <= 0:
            raise StateError(f"{gen!r} released more often than it was acquired")
        gen.refs -= 1
        if gen.refs > 0:
            return
        key = gen.path
        closing = None
        if self._live.get(key) is gen:
            del self._live[key]
            closing = self._closing[key] = trio.Event()
        try:
            await self._teardown(gen)
            if closing is not None and gen.retired is not None:
                _discard_stale_wal(key)
        finally:
            if closing is not None:
                closing.set()
                if self._closing.get(key) is closing:
                    del self._closing[key]

    async def close_all(self) -> None:
        """Drain every generation, live and retired (at shutdown)."""
        self._closed_all = True
        for gen in list(self._held):
            gen.refs = 0
        self._held.clear()
        self._live.clear()
        for gen in list(self._generations):
            gen.refs = 0
            await self._teardown(gen)

    def live_generation(self, path: os.PathLike[str] | str) -> Generation | None:
        return self._live.get(resolve(path))

    # -- internals ----------------------------------------------------------------

    async def _open(self, key: Path) -> Generation:
        self._numbers += 1
        number = self._numbers
        holder: list[Generation] = []

        def retired(why: str) -> None:
            if holder:
                holder[0].mark_retired(why)

        spec = ChildSpec(
            f"{key}#{number}",
            lambda: DbWriter(key, retired, self._checkpoint_interval, self._preload),
            restart=Restart.TEMPORARY,
        )
        try:
            writer = await self._sup.start_child(spec)
        except (OSError, apsw.Error, StateError) as exc:
            raise StateError(f"{key}: cannot open the database: {exc}") from exc
        gen = Generation(key, number, writer, ReadPool(key))
        holder.append(gen)
        return gen

    async def _teardown(self, gen: Generation) -> None:
        if gen not in self._generations:
            return
        self._generations.discard(gen)
        await gen.reads.close()
        name = f"{gen.path}#{gen.number}"
        if name in self._sup.child_names():
            await self._sup.stop_child(name)

    def generations(self) -> list[Any]:
        """Every open generation, live and retired (for status and tests)."""
        return sorted(self._generations, key=lambda g: g.number)
