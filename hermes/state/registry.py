"""The registry: one live generation per database path in this process.

`acquire(path)` returns the live generation for the resolved path, opening it
once however many tasks ask at the same moment; `release(gen)` is the only
way to let go, and the final release checkpoints and closes it. Acquisitions
of one path wait for each other; other paths are never held up. A generation
whose file was replaced is retired: never lent again, kept for its holders
until they release it, and the next acquire opens the new file. Code holds a
database through the handle (hermes.state.db.Db), not through these calls.

The registry hosts each generation's DbWriter in its own nursery: a writer
that crashes marks its generation crashed (never lent again) and takes
nothing else down.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import apsw
import attrs
import trio

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.snapshot import RunState, Snapshot
from hermes.actors.supervisor import ReadyStatus
from hermes.state.errors import StateError
from hermes.state.readpool import ReadPool
from hermes.state.writer import DbWriter
from hermes.state.writer_core import CheckIdentity

log = logging.getLogger(__name__)

WRITER_SHUTDOWN = 30.0  # a writer's flush is bounded; this bounds a stuck one


def resolve(path: os.PathLike[str] | str) -> Path:
    """One spelling per file: symlinks and '..' resolved."""
    return Path(os.path.realpath(path))


@attrs.define(eq=False)
class Generation:
    """One opened instance of a file: its writer and read pool, and who holds it.

    A plain record kept by the registry and lent to handles; nothing else holds one.
    """

    path: Path
    number: int
    actor: DbWriter
    reads: ReadPool
    writer: Address | None = None
    refs: int = 0
    retired: str | None = None
    crashed: bool = False
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    stopped: trio.Event = attrs.Factory(trio.Event)

    @property
    def usable(self) -> bool:
        return self.retired is None and not self.crashed

    def mark_retired(self, why: str) -> None:
        self.retired = why


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
    """Every DbWriter of the process, in the registry's own nursery; a child of the serve tree.

    `keep_open` paths are acquired before it reports ready (so a database that
    cannot be opened stops serve from starting) and released when it drains.
    """

    kind = "Registry"

    def __init__(self, keep_open: Iterable[Path] = (), checkpoint_interval: float = 60.0) -> None:
        self.name = "state"
        self.state = RunState.STARTING
        self._keep_open = [Path(p) for p in keep_open]
        self._checkpoint_interval = checkpoint_interval
        self._nursery: trio.Nursery | None = None
        self._live: dict[Path, Generation] = {}
        self._generations: set[Generation] = set()
        self._locks: dict[Path, trio.Lock] = {}
        self._closing: dict[Path, trio.Event] = {}
        self._numbers = 0
        self._held: list[Generation] = []
        self._closed_all = False
        self._drain = trio.Event()

    # -- the Child protocol -------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Registry] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    for path in self._keep_open:
                        self._held.append(await self.acquire(path))
                    self.state = RunState.RUNNING
                    task_status.started(self)
                    await self._drain.wait()
                finally:
                    self.state = RunState.DRAINING
                    with trio.CancelScope(shield=True):  # each writer's flush is bounded
                        await self.close_all()
                    self._nursery = None
        finally:
            self.state = RunState.STOPPED

    def stop_intake(self) -> None:
        """Writers keep taking writes until the registry itself is stopped (it stops last)."""

    def request_drain(self, deadline: float) -> None:
        self._drain.set()

    def snapshot(self) -> Snapshot:
        writers = tuple(
            attrs.evolve(g.actor.snapshot(), name=f"{g.path.name}#{g.number}")
            for g in self.generations()
        )
        return Snapshot(name=self.name, kind=self.kind, state=self.state, children=writers)

    # -- acquire / release ----------------------------------------------------------

    async def acquire(self, path: os.PathLike[str] | str) -> Generation:
        """The live generation for `path`, opened if need be; pair with `release`."""
        if self._nursery is None or self._closed_all:
            raise ActorStopped(self.name)
        key = resolve(path)
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            gen = self._live.get(key)
            if gen is not None and await _same_file(gen):
                gen.refs += 1
                return gen
            if gen is not None:  # retired (or its writer crashed): never lent again
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
            raise StateError(f"{gen.path}#{gen.number} released more often than it was acquired")
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
        self._held.clear()
        self._live.clear()
        for gen in list(self._generations):
            gen.refs = 0
            await self._teardown(gen)

    def generations(self) -> list[Generation]:
        """Every open generation, live and retired (for status)."""
        return sorted(self._generations, key=lambda g: g.number)

    # -- internals ----------------------------------------------------------------

    async def _open(self, key: Path) -> Generation:
        self._numbers += 1

        def retire(why: str) -> None:
            gen.mark_retired(why)  # gen is bound just below

        gen = Generation(
            key, self._numbers, DbWriter(key, retire, self._checkpoint_interval), ReadPool(key)
        )
        try:
            gen.writer = await self._nursery.start(self._host, gen)
        except (OSError, apsw.Error, StateError) as exc:
            raise StateError(f"{key}: cannot open the database: {exc}") from exc
        return gen

    async def _host(self, gen: Generation, task_status: trio.TaskStatus[Address]) -> None:
        """Runs one writer; a crash after it was ready marks its generation, nothing more."""
        status = ReadyStatus(task_status)
        try:
            with gen.scope:
                await gen.actor.run(task_status=status)
        except Exception as exc:
            if not status.started_ok:
                raise
            log.error("the writer of %s crashed: %r", gen.path, exc, exc_info=exc)
        finally:
            gen.crashed = True  # stopped, by design or not: it takes no more writes
            gen.stopped.set()

    async def _teardown(self, gen: Generation) -> None:
        """Stop the generation's writer (flush, checkpoint, close) and its read pool.
        Shielded and bounded: a release in a cancelled scope must not orphan a writer."""
        if gen not in self._generations:
            return
        self._generations.discard(gen)
        gen.actor.request_drain(trio.current_time() + WRITER_SHUTDOWN)
        with trio.CancelScope(shield=True):
            await gen.reads.close()
            with trio.move_on_after(WRITER_SHUTDOWN):
                await gen.stopped.wait()
            if not gen.stopped.is_set():
                log.error("the writer of %s did not stop in time; cancelling it", gen.path)
                gen.scope.cancel()
                await gen.stopped.wait()


async def _same_file(gen: Generation) -> bool:
    """Ask the writer whether the path still names this file (it retires if not)."""
    if not gen.usable or gen.writer is None:
        return False
    try:
        return await gen.writer.call(CheckIdentity(), timeout=None)  # it answers every call
    except ActorStopped:
        gen.crashed = True
        return False
