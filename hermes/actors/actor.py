"""The Actor base class: one mailbox, one loop, phased drain.

Subclasses implement `handle(msg)`; its return value is the reply to a call.
An exception raised while handling a call goes back to the caller; one raised
while handling a cast crashes the actor, which is what its supervisor sees.
"""

from __future__ import annotations

import collections
import contextlib
import math
from typing import Any

import trio

from hermes.actors.address import Address, Call
from hermes.actors.errors import ActorStopped
from hermes.actors.snapshot import RunState, Snapshot


class Actor:
    """Subclass, set `mailbox_size` if 16 is wrong, and implement `handle`.

    Drain phases, and what they mean for a plain actor:
    1. `stop_intake()`: the mailbox closes; senders get ActorStopped at once.
       Messages already accepted are kept as in-flight work.
    2. finish in-flight work until the drain deadline: handle the kept
       messages, then `finish_in_flight()` (override to wait for your tasks).
       The actor then waits for `request_drain`, so siblings still stop in
       reverse order even though every intake closed at once.
    3. `flush()` under a shield, bounded by `flush_timeout`.
    4. cancel whatever still runs in `self.nursery`.

    An actor ends itself normally with `stop()`.

    Resources an actor holds for its life (a database handle) go on `self.exits`,
    an exit stack closed after every task of the actor has ended, shielded.
    """

    mailbox_size: int = 16
    flush_timeout: float = 5.0

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.state = RunState.STARTING
        self.address: Address | None = None
        self.nursery: trio.Nursery | None = None
        self.exits = contextlib.AsyncExitStack()
        self._recv: trio.MemoryReceiveChannel[Any] | None = None
        self._pending: collections.deque[Any] = collections.deque()
        self._intake_closed = False
        self._drain_deadline = math.inf
        self._finish_scope: trio.CancelScope | None = None
        self._drain_requested = trio.Event()

    @property
    def kind(self) -> str:
        return type(self).__name__

    # -- hooks for subclasses -------------------------------------------------

    async def on_start(self) -> None:
        """Runs before the actor reports ready; open resources here (on `self.exits`)."""

    def ready_handle(self) -> Any:
        """What the actor reports when ready (its parent hands it out): its Address,
        or a typed handle that carries it."""
        return self.address

    async def handle(self, msg: Any) -> Any:
        raise NotImplementedError(f"{self.kind} does not handle {type(msg).__name__}")

    def detail(self) -> dict[str, Any]:
        """What `hermes status` shows of this actor beyond its run state."""
        return {}

    async def finish_in_flight(self) -> None:
        """Phase 2, after the kept messages are handled; bounded by the deadline."""

    async def flush(self) -> None:
        """Phase 3: persist what must not be lost. Shielded, bounded by flush_timeout."""

    # -- drain protocol (called by the supervisor) ----------------------------

    def stop_intake(self) -> None:
        """Phase 1. Override with a no-op for an actor others need until it is stopped."""
        self._close_intake()

    def request_drain(self, deadline: float) -> None:
        """Finish in-flight work by `deadline`, flush, and return."""
        self._drain_deadline = min(self._drain_deadline, deadline)
        if self._finish_scope is not None:
            self._finish_scope.deadline = self._drain_deadline
        self._close_intake()
        self._drain_requested.set()

    def stop(self) -> None:
        """End this actor normally: handle what is already queued, flush, return."""
        self._close_intake()
        self._drain_requested.set()

    def snapshot(self) -> Snapshot:
        depth = 0
        if self._recv is not None:
            depth = self._recv.statistics().current_buffer_used + len(self._pending)
        return Snapshot(
            name=self.name,
            kind=self.kind,
            state=self.state,
            mailbox_depth=depth,
            detail=self.detail(),
        )

    # -- the loop -------------------------------------------------------------

    def _close_intake(self) -> None:
        if self._intake_closed:
            return
        self._intake_closed = True
        recv = self._recv
        if recv is None:
            return
        while True:
            try:
                self._pending.append(recv.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        recv.close()

    async def _dispatch(self, item: Any) -> None:
        if type(item) is Call:
            reply = item.reply
            try:
                result = await self.handle(item.msg)
            except Exception as exc:
                reply.fail(exc)
                return
            except BaseException:
                reply.fail(ActorStopped(self.name))
                raise
            reply.set(result)
        else:
            await self.handle(item)

    def dropped(self, msg: Any) -> None:
        """A cast this actor accepted and will never handle (it stopped first).
        Override when a sender waits on something the message carries."""

    def _refuse_pending(self) -> None:
        self._close_intake()
        while self._pending:
            item = self._pending.popleft()
            if type(item) is Call:
                item.reply.fail(ActorStopped(self.name))
            else:
                self.dropped(item)

    async def _receive_loop(self, recv: trio.MemoryReceiveChannel[Any]) -> None:
        dispatch = self._dispatch
        handle = self.handle
        async for item in recv:
            if type(item) is Call:
                await dispatch(item)
            else:
                await handle(item)  # the hot path for casts: no extra frame

    async def _handle_pending(self) -> None:
        while self._pending:
            await self._dispatch(self._pending.popleft())

    async def _serve(self, recv: trio.MemoryReceiveChannel[Any]) -> None:
        """Handle messages until intake closes, then finish in-flight work (phase 2)."""
        try:
            await self._receive_loop(recv)
        except trio.ClosedResourceError:
            pass
        self.state = RunState.DRAINING
        self._close_intake()
        with trio.CancelScope(deadline=self._drain_deadline) as self._finish_scope:
            await self._handle_pending()
            await self.finish_in_flight()
            await self._drain_requested.wait()

    async def run(
        self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
    ) -> None:
        send, recv = trio.open_memory_channel[Any](self.mailbox_size)
        self._recv = recv
        self.address = Address(self.name, send)
        crash: Exception | None = None
        started = False
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                try:
                    await self.on_start()
                    if self._intake_closed:  # stop_intake came before run()
                        self._intake_closed = False
                        self._close_intake()
                    self.state = RunState.RUNNING
                    task_status.started(self.ready_handle())
                    started = True
                    await self._serve(recv)
                except Exception as exc:
                    crash = exc  # re-raised below with its own type, not wrapped in a group
                finally:
                    self.state = RunState.DRAINING
                    self._refuse_pending()
                    if started and crash is None:
                        with trio.CancelScope(shield=True) as flush_scope:
                            flush_scope.deadline = trio.current_time() + self.flush_timeout
                            await self.flush()
                nursery.cancel_scope.cancel()
        finally:
            self._refuse_pending()
            send.close()
            with trio.CancelScope(shield=True):
                await self.exits.aclose()
            self.state = RunState.STOPPED
        if crash is not None:
            raise crash
