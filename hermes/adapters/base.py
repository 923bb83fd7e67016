"""The adapter base: one platform connection, alive only while it makes progress.

A subclass implements `connect()` (speak the wire protocol: receive, `admit`,
acknowledge, and call `progress()` whenever the platform shows it is alive)
and `send()`. The base runs the connection under its own cancel scope with a
watchdog: no progress within `progress_deadline` seconds cancels it and the
actor crashes, so its supervisor restarts it with jittered backoff. Raising
`AdapterFatal` (a bad token, a disabled app) ends the actor normally instead:
under a TRANSIENT child spec it is not restarted, and its status says why.

The status outlives each incarnation (the tree makes one per platform and
hands it to every restart), so `hermes status` shows restarts, backoff and a
fatal reason across them.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import (
    Admit,
    ChatType,
    InboundEvent,
    RetryAfter,
    Send,
    SendRequest,
    SendResult,
    TurnEvent,
    Unconfirmed,
)
from hermes.adapters.cursors import Cursors
from hermes.config import PlatformConfig, Secrets

log = logging.getLogger(__name__)

CONNECTING, LIVE, BACKING_OFF, FATAL, STOPPED = (
    "connecting",
    "live",
    "backing off",
    "fatal",
    "stopped",
)


class AdapterFatal(Exception):
    """The platform refused us for good (bad token, disabled app): no more restarts."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProgressLost(Exception):
    """No progress within the deadline: the connection is presumed dead."""


class ConnectionEnded(Exception):
    """The platform closed the connection; the supervisor connects again."""


@attrs.define
class AdapterStatus:
    """One platform's connection state, kept across the adapter's restarts."""

    state: str = CONNECTING
    reason: str | None = None
    last_progress: float | None = None  # trio time

    def detail(self) -> dict[str, Any]:
        age = None
        if self.last_progress is not None:
            age = round(trio.current_time() - self.last_progress, 1)
        return {"adapter": self.state, "reason": self.reason, "progress_age": age}


class PlatformAdapter(Actor):
    """Subclass per platform; set `platform` and `progress_deadline`."""

    platform: str = "?"
    progress_deadline: float = 90.0
    concurrent_sends: int = 16  # in flight at once, across chats
    deduplicates: bool = False  # the platform drops a repeat of a send's idempotency key
    send_grace: float = 45.0  # a send's own limit, past its HTTP timeouts
    typing_every: float = math.inf  # while a turn runs, `type_once` this often (inf: never)
    typing_at_most: float = 600.0

    def __init__(self, name: str, status: AdapterStatus, admit: Admit) -> None:
        super().__init__(name)
        self.status = status
        self._admit = admit
        self._admitting = 0
        self._last = 0.0
        self._sends = trio.Semaphore(self.concurrent_sends)
        self._typing: dict[str, trio.CancelScope] = {}  # event id -> its indicator

    # -- for subclasses -------------------------------------------------------

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """Ask the platform's auth endpoint who the token belongs to, with the calls
        `connect()` makes (for `hermes doctor`, without starting the adapter): the
        bot's identity, or AdapterFatal when the token is refused. Network errors
        and the platform's other answers pass through."""
        raise NotImplementedError(f"{cls.__name__} has no token check")

    async def connect(self) -> None:
        """Run the connection until it fails; call `progress()` as the platform answers."""
        raise NotImplementedError

    async def send(self, request: SendRequest) -> SendResult:
        raise NotImplementedError

    async def type_once(self, event: InboundEvent) -> None:
        """Show "typing" in the event's chat once (a platform with an indicator sets
        `typing_every` too); failures are only logged: it is best effort."""

    async def show(self, event: TurnEvent) -> None:
        """A step of a turn in progress: the turn's end stops its typing indicator."""
        if event.final:
            scope = self._typing.pop(event.event_id, None)
            if scope is not None:
                scope.cancel()

    async def admit(self, event: InboundEvent) -> bool:
        """Hand the event to the gateway; acknowledge it to the platform only after this
        returns (False: a duplicate, acknowledge it too). The time it takes is the
        gateway's, not the platform's: the progress deadline waits for it."""
        self._admitting += 1
        try:
            admitted = await self._admit(event)
        finally:
            self._admitting -= 1
            self._last = max(self._last, trio.current_time())
        if admitted:
            self._start_typing(event)
        return admitted

    def progress(self) -> None:
        """The platform answered: the connection is alive."""
        self._last = trio.current_time()
        self.status.last_progress = self._last
        if self.status.state != LIVE:
            self.status.state, self.status.reason = LIVE, None

    # -- the base -------------------------------------------------------------

    def _start_typing(self, event: InboundEvent) -> None:
        """While the event's turn runs (until its final step, at most typing_at_most):
        only for one addressed to us, or no turn will run."""
        if math.isinf(self.typing_every):
            return
        if not event.mentioned and event.chat_type is not ChatType.DM:
            return
        scope = trio.CancelScope(deadline=trio.current_time() + self.typing_at_most)
        self._typing[event.event_id] = scope
        self.nursery.start_soon(self._keep_typing, event, scope)

    async def _keep_typing(self, event: InboundEvent, scope: trio.CancelScope) -> None:
        try:
            with scope:
                while True:
                    try:
                        await self.type_once(event)
                    except Exception as exc:  # best effort
                        log.debug("%s: typing: %s", self.name, exc)
                    await trio.sleep(self.typing_every)
        finally:
            self._typing.pop(event.event_id, None)

    def detail(self) -> dict[str, Any]:
        deadline = self.progress_deadline if math.isfinite(self.progress_deadline) else None
        return {**self.status.detail(), "deadline": deadline}  # None: it waits on nobody

    async def _send(self, msg: Send) -> None:
        """One send, shielded for up to `send_grace`: a connection replaced under it (a
        hung poll, a 409 storm) has nothing to do with the send's own request, which
        finishes with its real result instead of an unknown one."""
        try:
            result: SendResult = Unconfirmed(f"{self.name}: no answer in {self.send_grace:g} s")
            with trio.CancelScope(shield=True), trio.move_on_after(self.send_grace):
                try:
                    result = await self.send(msg.request)
                except Exception as exc:  # a bug in send: the row waits and goes again
                    log.exception("%s: a send failed", self.name)
                    result = RetryAfter(None, f"{self.name} failed to send: {exc!r}")
            msg.reply.set(result)
        finally:
            self._sends.release()

    def dropped(self, msg: Any) -> None:
        if isinstance(msg, Send):
            msg.reply.fail(ActorStopped(self.name))

    async def flush(self) -> None:
        if self.status.state in (CONNECTING, LIVE):  # not a crash: keep what that said
            self.status.state, self.status.reason = STOPPED, None

    def stop_intake(self) -> None:
        """Keep the connection through the drain: events still arrive and are admitted
        (the router answers them with the drain notice, or after the restart)."""

    async def on_start(self) -> None:
        if isinstance(self._admit, contextlib.AbstractAsyncContextManager):
            await self.exits.enter_async_context(self._admit)  # what admission holds open
        if self.status.state != FATAL:
            self.status.state, self.status.reason = CONNECTING, None
        self._last = trio.current_time()
        self.nursery.start_soon(self._connection)

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Send):
            await self._sends.acquire()  # backpressure: the mailbox waits, not a task pile
            self.nursery.start_soon(self._send, msg)
            return None
        if isinstance(msg, TurnEvent):
            return await self.show(msg)
        raise TypeError(f"{self.name} cannot handle {type(msg).__name__}")

    async def _connection(self) -> None:
        watch = trio.CancelScope()
        with trio.CancelScope() as connection:
            self.nursery.start_soon(self._watch, connection, watch)
            try:
                await self.connect()
                raise ConnectionEnded(f"{self.platform}: the platform closed the connection")
            except Exception as exc:
                fatal = _fatal_in(exc)
                if fatal is None:
                    self.status.state, self.status.reason = BACKING_OFF, _describe(exc)
                    raise
                log.error("%s: %s; not restarting", self.name, fatal.reason)
                self.status.state, self.status.reason = FATAL, fatal.reason
                self.stop()
                return
            finally:
                watch.cancel()
        why = f"no progress for {self.progress_deadline:g} s"
        self.status.state, self.status.reason = BACKING_OFF, why
        raise ProgressLost(f"{self.name}: {why}")

    async def _watch(self, connection: trio.CancelScope, watch: trio.CancelScope) -> None:
        """Cancel the connection when no progress came within the deadline."""
        with watch:
            deadline = self._last + self.progress_deadline
            while deadline > trio.current_time() or self._admitting:
                await trio.sleep_until(max(deadline, trio.current_time() + 1.0))
                deadline = self._last + self.progress_deadline  # moved on by progress
            connection.cancel()


@attrs.frozen
class AdapterSetup:
    """What one incarnation of a platform's adapter is built from: the platform's name
    and config, the secrets its token variables name (only those), the status kept
    across restarts, admission, what it keeps in state.db between incarnations (a
    poll offset), and where it may save media (None: it saves none)."""

    name: str
    config: PlatformConfig
    secrets: Secrets
    status: AdapterStatus
    admit: Admit
    cursors: Cursors | None = None
    cache: Path | None = None


AdapterFactory = Callable[[AdapterSetup], "PlatformAdapter"]


def _fatal_in(exc: BaseException) -> AdapterFatal | None:
    """The AdapterFatal that ended a connection, also from inside an exception group
    (a connection that runs tasks of its own)."""
    if isinstance(exc, AdapterFatal):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _fatal_in(inner)) is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
