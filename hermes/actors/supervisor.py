"""Supervisors with OTP semantics: strategies, restart types, intensity, backoff, drain.

A supervisor runs its children in order (each ready before the next), watches
them, restarts them by its strategy with jittered exponential backoff on the
Trio clock, and gives up (stopping its children, then failing to its own
parent) when restarts exceed `max_restarts` within `period` seconds.
Children stop in reverse order: each is asked to drain by a deadline and is
cancelled if it is still running then.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import attrs
import trio

from hermes.actors.backoff import Backoff
from hermes.actors.errors import (
    ActorError,
    ActorStopped,
    ChildStartError,
    Outside,
    SupervisorGaveUp,
)
from hermes.actors.ref import Ref
from hermes.actors.snapshot import RunState, Snapshot

log = logging.getLogger(__name__)


class Child(Protocol):
    """What a supervisor can host: an Actor, another Supervisor, or any such object."""

    name: str

    async def run(self, *, task_status: trio.TaskStatus[Any] = ...) -> None: ...

    def stop_intake(self) -> None: ...

    def request_drain(self, deadline: float) -> None: ...

    def snapshot(self) -> Snapshot: ...


class Strategy(enum.StrEnum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


class Restart(enum.StrEnum):
    PERMANENT = "permanent"  # always restarted
    TRANSIENT = "transient"  # restarted only after a crash
    TEMPORARY = "temporary"  # never restarted


@attrs.frozen
class ChildSpec:
    """How to make a child and what to do when it ends.

    `factory` builds a fresh child for every (re)start. `shutdown` is the
    child's own drain deadline in seconds, counted from when it is asked to stop.
    `grace`: seconds it gets to stop even when the parent's drain deadline has
    passed (adapters delivering the last answers of turns cut at that deadline).
    `ref`: pointed at the child's ready handle on every start, cleared when it ends.
    """

    name: str
    factory: Callable[[], Child]
    restart: Restart = Restart.PERMANENT
    shutdown: float = 5.0
    grace: float = 0.0
    ref: Ref | None = None


@attrs.define(eq=False)
class _Slot:
    spec: ChildSpec
    child: Child | None = None
    handle: Any = None
    scope: trio.CancelScope | None = None
    done: trio.Event = attrs.Factory(trio.Event)
    incarnation: int = 0
    restarts: int = 0
    stopping: bool = False

    @property
    def running(self) -> bool:
        return self.child is not None and not self.done.is_set()


@attrs.frozen
class _Exit:
    slot: _Slot
    incarnation: int
    error: BaseException | None


class ReadyStatus:
    """Wraps a task_status to learn whether a hosted child reached ready (a crash
    before it is a failed start; after it, a crash the host handles)."""

    def __init__(self, inner: trio.TaskStatus[Any], ref: Ref | None = None) -> None:
        self.inner = inner
        self.ref = ref
        self.started_ok = False

    def started(self, value: Any = None) -> None:
        if self.ref is not None:
            self.ref.point(value)  # a handle of the wrong kind fails the start, here
        self.started_ok = True
        self.inner.started(value)


class Supervisor:
    """Hosts children in order and keeps them running by its strategy."""

    kind = "Supervisor"

    def __init__(
        self,
        name: str,
        children: Iterable[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        period: float = 5.0,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.period = period
        self.backoff = backoff or Backoff()
        self.state = RunState.STARTING
        self._rng = rng or random.Random()
        self._slots: list[_Slot] = []
        for spec in children:
            self._check_new_name(spec.name)
            self._slots.append(_Slot(spec))
        self._restart_times: list[float] = []
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()
        self._loop_scope = trio.CancelScope()
        self._intake_stopped = False
        self._drain_deadline = math.inf
        self._failure: ActorError | None = None  # raised to the parent once children stopped
        # One exit notice per child incarnation at most, so this is bounded by
        # the number of children even though the channel is not.
        self._exits_send, self._exits = trio.open_memory_channel[_Exit](math.inf)

    # -- public API -----------------------------------------------------------

    def child_names(self) -> list[str]:
        return [s.spec.name for s in self._slots]

    async def start_child(self, spec: ChildSpec) -> Any:
        """Add a child at run time, after the others; returns its ready handle."""
        if self._nursery is None or self._intake_stopped:
            raise ActorStopped(self.name)
        async with self._lock:
            self._check_new_name(spec.name)
            slot = _Slot(spec)
            self._slots.append(slot)
            try:
                await self._start(slot)
            except BaseException:
                self._slots.remove(slot)
                raise
            return slot.handle

    async def stop_child(self, name: str) -> None:
        """Drain and remove a child by its spec's shutdown deadline."""
        async with self._lock:
            slot = self._slot(name)
            await self._stop(slot, trio.current_time() + slot.spec.shutdown)
            self._slots.remove(slot)

    def drain(self, deadline: float) -> None:
        """Phased shutdown of the whole subtree: stop intake everywhere, then stop in reverse."""
        self.stop_intake()
        self.request_drain(deadline)

    def stop_intake(self) -> None:
        self._intake_stopped = True
        for slot in reversed(self._slots):
            if slot.running:
                slot.child.stop_intake()

    def request_drain(self, deadline: float) -> None:
        self._drain_deadline = min(self._drain_deadline, deadline)
        self.state = RunState.DRAINING
        self._loop_scope.cancel()

    def snapshot(self) -> Snapshot:
        children = []
        for slot in self._slots:
            if slot.child is None:
                snap = Snapshot(name=slot.spec.name, kind="?", state=RunState.STOPPED)
            else:
                snap = slot.child.snapshot()
            children.append(attrs.evolve(snap, name=slot.spec.name, restarts=slot.restarts))
        return Snapshot(
            name=self.name,
            kind=f"{self.kind}:{self.strategy}",
            state=self.state,
            children=tuple(children),
        )

    # -- running --------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self._start_initial()
                if self._failure is None:
                    self.state = RunState.RUNNING
                    task_status.started(self)
                    with self._loop_scope:
                        async for notice in self._exits:
                            async with self._lock:
                                await self._on_exit(notice)
                            if self._failure is not None:
                                break
                self.state = RunState.DRAINING
                await self._stop_all(self._drain_deadline)
        finally:
            self.state = RunState.STOPPED
        if self._failure is not None:
            raise self._failure

    async def _start_initial(self) -> None:
        for slot in list(self._slots):
            if self._intake_stopped:
                break
            try:
                await self._start(slot)
            except Exception as exc:
                log.error(
                    "supervisor %s: child %s failed to start: %r", self.name, slot.spec.name, exc
                )
                self._failure = ChildStartError(self.name, slot.spec.name)
                self._failure.__cause__ = exc
                return

    async def _start(self, slot: _Slot) -> None:
        assert self._nursery is not None
        slot.incarnation += 1
        slot.child = slot.spec.factory()
        slot.child.name = slot.spec.name
        slot.done = trio.Event()
        slot.stopping = False
        slot.handle = await self._nursery.start(self._host, slot, slot.child, slot.incarnation)
        if self._intake_stopped:
            slot.child.stop_intake()

    async def _host(
        self, slot: _Slot, child: Child, incarnation: int, task_status: trio.TaskStatus[Any]
    ) -> None:
        status = ReadyStatus(task_status, slot.spec.ref)
        error: BaseException | None = None
        try:
            with trio.CancelScope() as scope:
                slot.scope = scope
                await child.run(task_status=status)
        except Exception as exc:
            if not status.started_ok:
                raise
            error = exc
            if outside := _outside(exc):  # expected: one line; the traceback for debugging
                log.warning("%s/%s: %s", self.name, slot.spec.name, "; ".join(outside))
                log.debug("%s/%s ended by", self.name, slot.spec.name, exc_info=exc)
            else:
                log.error("%s/%s crashed: %r", self.name, slot.spec.name, exc, exc_info=exc)
        finally:
            slot.done.set()
            if slot.spec.ref is not None and incarnation == slot.incarnation:
                slot.spec.ref.point(None)
        if not status.started_ok:
            raise RuntimeError(f"child {slot.spec.name!r} returned before it was ready")
        if not slot.stopping:
            self._exits_send.send_nowait(_Exit(slot, incarnation, error))

    async def _on_exit(self, notice: _Exit) -> None:
        slot = notice.slot
        if slot not in self._slots or notice.incarnation != slot.incarnation or slot.stopping:
            return  # stale: that incarnation was already stopped or replaced
        restart = slot.spec.restart
        crashed = notice.error is not None
        if restart is Restart.TEMPORARY:
            self._slots.remove(slot)
            return
        if restart is Restart.TRANSIENT and not crashed:
            log.info("supervisor %s: %s ended by itself; not restarted", self.name, slot.spec.name)
            return
        now = trio.current_time()
        self._restart_times = [t for t in self._restart_times if t > now - self.period]
        self._restart_times.append(now)
        if len(self._restart_times) > self.max_restarts:
            log.error("supervisor %s: restart intensity exceeded; giving up", self.name)
            self._failure = SupervisorGaveUp(
                self.name, self.max_restarts, self.period, slot.spec.name
            )
            self._failure.__cause__ = notice.error
            return

        index = self._slots.index(slot)
        if self.strategy is Strategy.ONE_FOR_ONE:
            group = [slot]
        elif self.strategy is Strategy.ONE_FOR_ALL:
            group = list(self._slots)
        else:
            group = self._slots[index:]
        for other in reversed(group):
            if other is not slot and other.running:
                await self._stop(other, trio.current_time() + other.spec.shutdown)
        for other in group:
            if other is not slot and other.spec.restart is Restart.TEMPORARY:
                self._slots.remove(other)
        group = [s for s in group if s in self._slots]

        await trio.sleep(self.backoff.delay(len(self._restart_times), self._rng))
        for member in group:
            member.restarts += 1
            try:
                await self._start(member)
            except Exception as exc:
                log.error("%s/%s failed to restart: %r", self.name, member.spec.name, exc)
                self._exits_send.send_nowait(_Exit(member, member.incarnation, exc))
                return

    async def _stop(self, slot: _Slot, deadline: float) -> None:
        """Ask one child to drain by `deadline`; cancel it if it is still running then."""
        if not slot.running:
            return
        slot.stopping = True
        slot.child.request_drain(deadline)
        with trio.move_on_at(deadline):
            await slot.done.wait()
        if not slot.done.is_set():
            log.info(
                "%s/%s still running at its drain deadline; cancelling", self.name, slot.spec.name
            )
            slot.scope.cancel()
            await slot.done.wait()

    async def _stop_all(self, deadline: float) -> None:
        """Phase 1 for every child first, then stop them one by one in reverse order."""
        self.stop_intake()
        for slot in reversed(self._slots):
            now = trio.current_time()
            await self._stop(
                slot, max(min(deadline, now + slot.spec.shutdown), now + slot.spec.grace)
            )

    # -- helpers --------------------------------------------------------------

    def _slot(self, name: str) -> _Slot:
        for slot in self._slots:
            if slot.spec.name == name:
                return slot
        raise KeyError(f"supervisor {self.name!r} has no child {name!r}")

    def _check_new_name(self, name: str) -> None:
        if any(s.spec.name == name for s in self._slots):
            raise ValueError(f"supervisor {self.name!r} already has a child {name!r}")


def _outside(exc: BaseException) -> list[str]:
    """What ended a child, when all of it came from outside hermes (Outside, also inside
    the groups an actor's nursery wraps it in); empty otherwise."""
    if isinstance(exc, BaseExceptionGroup):
        said = [_outside(inner) for inner in exc.exceptions]
        return [line for lines in said for line in lines] if all(said) else []
    return [str(exc) or type(exc).__name__] if isinstance(exc, Outside) else []
