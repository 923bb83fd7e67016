"""The adapter base: one platform connection, alive only while it makes progress.

A subclass implements `connect()` (speak the wire protocol: receive, `admit`,
acknowledge, and call `progress()` whenever the platform shows it is alive)
and `send()`. The base runs each connection under its own cancel scope with a
watchdog: no progress within `progress_deadline` seconds cancels it and the
actor crashes, so its supervisor restarts it with jittered backoff. Raising
`AdapterFatal` (a bad token, a disabled app) ends the actor normally instead:
under a TRANSIENT child spec it is not restarted, and its status says why.

`connect()` may also return (or raise `ConnectionEnded` from a task of its own): the
platform ended the connection the way it ends healthy ones (Discord's reconnect
request, a resumable close, Slack's socket closed), and the base connects again in the
same incarnation. It paces that once for every adapter:
at once after a connection that `settled()` (showed real progress beyond its
handshake), after a jittered backoff that grows with each early failure in a
row otherwise, so a platform that drops us right after the handshake is not
hammered (Discord caps IDENTIFYs per day and resets the token past the cap).

The status outlives each incarnation (the tree makes one per platform and
hands it to every restart), so `hermes status` shows restarts, backoff and a
fatal reason across them, and the run of early failures continues across them.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Generic, TypeVar, cast, get_args

import attrs
import httpx
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from hermes.actors.actor import Actor
from hermes.actors.backoff import Backoff
from hermes.actors.errors import ActorStopped, HermesError, Outside
from hermes.actors.link import (
    BACKING_OFF,
    CONNECTING,
    FATAL,
    LINK_BACKOFF,
    LIVE,
    STOPPED,
    LinkStatus,
)
from hermes.adapters.contract import (
    Admit,
    ChatType,
    Cursor,
    DeliveryFailed,
    Fetch,
    Fetched,
    InboundEvent,
    Recorded,
    RetryAfter,
    Send,
    SendRequest,
    SendResult,
    TurnStep,
    Unconfirmed,
)
from hermes.adapters.cursors import Cursors
from hermes.adapters.media import DEFAULT_LIMITS, MediaLimits
from hermes.adapters.refusals import Codes, Refusal, is_auth, result_of
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.webhooks import NO_SUCH_WEBHOOK, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

FILES_AT_ONCE = 2  # downloads and file sends of one adapter at a time


class AdapterFatal(HermesError):
    """The platform refused us for good (bad token, disabled app): no more restarts."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProgressLost(Outside):
    """No progress within the deadline: the connection is presumed dead."""


class ConnectionEnded(Outside):
    """The platform ended the connection the way it ends healthy ones, said from inside
    a task of the connection's: the same as `connect()` returning the reason (the base
    connects again, paced)."""


class ConnectionFailed(Outside):
    """The connection failed on the network's side (no route, no name, refused, reset, a
    timeout, a TLS error): said in one line, as its status says it."""


# What ends a connection from outside hermes; anything else is a bug, logged whole.
NETWORK_ERRORS = (
    OSError,
    TimeoutError,
    httpx.TransportError,
    trio.BrokenResourceError,
    trio.TooSlowError,
    ConnectionClosed,
    HandshakeError,
    Outside,
)


def _from_outside(exc: BaseException) -> bool:
    """Whether every exception in `exc` (a group's too) came from outside hermes."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_from_outside(inner) for inner in exc.exceptions)
    return isinstance(exc, NETWORK_ERRORS)


C = TypeVar("C", bound=PlatformConfig)


class PlatformAdapter(Actor, Generic[C]):
    """Subclass per platform as `PlatformAdapter[ItsConfig]` (or `HttpAdapter[...]`): the
    config class is declared there once, checked when the adapter is built from its
    setup and held as `self.config`; set `progress_deadline`."""

    platform: str = "?"  # the class's own; an adapter's is its setup's name
    settings: type[PlatformConfig] = PlatformConfig  # from the subscript: its section
    progress_deadline: float = 90.0
    concurrent_sends: int = 16  # in flight at once, across chats
    typing_every: float = math.inf  # while a turn runs, `type_once` this often (inf: never)
    typing_after: float = 0.3  # a turn answered sooner shows no indicator: no request
    typing_at_most: float = 600.0
    reconnect_backoff: Backoff = LINK_BACKOFF  # after connections that ended unsettled
    # A platform that pushes to hermes (webhooks) keeps admitting what comes while its
    # token is refused (the platform holds nothing for us); only its sends wait.
    receives_when_refused: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            for arg in get_args(base):
                if isinstance(arg, type) and issubclass(arg, PlatformConfig):
                    cls.settings = arg
        if "type_once" in cls.__dict__ and math.isinf(cls.typing_every):
            raise TypeError(f"{cls.__name__} shows typing (type_once): set its typing_every")

    def __init__(self, setup: AdapterSetup) -> None:
        """Built from its setup: `setup.cache` is the directory its media is saved in
        (None: it saves none), within `setup.media`'s limits."""
        super().__init__(setup.name)
        self.platform = setup.name
        self.config: C = self.configured(setup.config)
        self.secrets = setup.secrets
        self.status = setup.status
        self.cursors = setup.cursors
        self.cache = setup.cache
        self.media = setup.media
        self._admit = setup.admit
        self._admitting = 0
        self._last = 0.0
        self._settled = False  # this connection showed progress beyond its handshake
        self._rng = random.Random()
        self._sends = trio.Semaphore(self.concurrent_sends)
        # Downloads, and sends of files (some platforms take them whole, in base64), are
        # few at once: each may hold a file's worth of buffers.
        self._files = trio.Semaphore(FILES_AT_ONCE)
        self._typing: dict[str, trio.CancelScope] = {}  # event id -> its indicator
        self._current: trio.CancelScope | None = None  # the connection running now

    @classmethod
    def configured(cls, config: PlatformConfig) -> C:
        """`config` as this adapter's own section (the tree reads it as its Platform's
        `settings`); TypeError for another."""
        if not isinstance(config, cls.settings):
            raise TypeError(f"{cls.__name__} needs a {cls.settings.__name__}, not {config!r}")
        return cast(C, config)

    # -- for subclasses -------------------------------------------------------

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """Ask the platform's auth endpoint who the token belongs to, with the calls
        `connect()` makes (for `hermes doctor`, without starting the adapter): the
        bot's identity, or AdapterFatal when the token is refused. Network errors
        and the platform's other answers pass through."""
        raise NotImplementedError(f"{cls.__name__} has no token check")

    async def connect(self) -> str | None:
        """Run one connection; call `progress()` as the platform answers. Raise when it
        failed (a crash: the supervisor restarts the actor); return why it ended when
        the platform ended it as it ends healthy connections (the base connects again,
        paced by `settled()`)."""
        raise NotImplementedError

    async def send(self, request: SendRequest) -> SendResult:
        raise NotImplementedError

    async def type_once(self, event: InboundEvent) -> None:
        """Show "typing" in the event's chat once (a platform with an indicator sets
        `typing_every` too); failures are only logged: it is best effort."""

    async def show(self, step: TurnStep) -> None:
        """A step of a turn in progress: the turn's end stops its typing indicator."""
        if step.final:
            scope = self._typing.pop(step.event_id, None)
            if scope is not None:
                scope.cancel()

    async def admit(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        """Hand the event to the gateway; acknowledge it to the platform only after this
        returns (False: a duplicate, acknowledge it too). `cursor` commits with it. The
        time it takes is the gateway's, not the platform's: the progress deadline waits
        for it."""
        self._admitting += 1
        try:
            admitted = await self._admit(event, cursor)
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
            self.status.live()

    async def wait_as_told(self, seconds: float, why: str) -> None:
        """The platform answered "not now, wait `seconds`" (a 429, a conflict): the
        connection lives, so progress is shown through the wait (it is shorter than the
        deadline in steps), and the status says backing off, and why, until it ends."""
        log.warning("%s: %s", self.name, why)
        until = trio.current_time() + seconds
        while True:
            self.progress()
            self.status.state, self.status.reason = BACKING_OFF, why  # progress() clears it
            if trio.current_time() >= until:
                return
            await trio.sleep(min(until - trio.current_time(), self.progress_deadline / 2))

    def refused(self, refusal: Refusal, codes: Codes, edit_of: str | None = None) -> SendResult:
        """A send (or the edit of `edit_of`) the platform refused, as the contract's
        result (hermes.adapters.refusals); a refused token also ends the adapter: fatal,
        with the reason in its status, its rows kept for when the token is fixed."""
        if is_auth(refusal, codes):
            reason = f"the token was refused: {refusal.reason}"
            self.fatal(reason, stop=not self.receives_when_refused)
        return result_of(refusal, codes, edit_of)

    def fatal(self, reason: str, stop: bool = True) -> None:
        """End the adapter for good (a refused token, a disabled app), `reason` in its
        status, as an AdapterFatal from `connect()` does: not restarted. `stop=False`: it
        keeps admitting what the platform pushes to it, and holds its sends."""
        if self.status.state == FATAL:
            return
        log.error("%s: %s; %s", self.name, reason, "not restarting" if stop else "not sending")
        self.status.state, self.status.reason = FATAL, reason
        if stop:
            if self._current is not None:  # a send found it: its connection ends here too
                self._current.cancel()
            self.stop()

    def settled(self) -> None:
        """The connection showed real progress beyond its handshake (a hello, which any
        flapping endpoint sends, is not enough; Discord: a heartbeat acknowledged on a
        live session): when it ends the next one starts at once, and the run of early
        failures is over."""
        self._settled = True
        self.status.settled()

    # -- the base -------------------------------------------------------------

    def _start_typing(self, event: InboundEvent) -> None:
        """While the event's turn runs (from typing_after on, until its final step, at
        most typing_at_most): only for one addressed to us, or no turn will run."""
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
                await trio.sleep(self.typing_after)
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
        return {**self.status.detail("adapter"), "deadline": deadline}  # None: it waits on nobody

    async def _send(self, msg: Send) -> None:
        """One send, shielded for up to its deadline: a connection replaced under it (a
        hung poll, a 409 storm) has nothing to do with the send's own request, which
        finishes with its real result instead of an unknown one."""
        try:
            deadline = msg.request.deadline
            result: SendResult = Unconfirmed(f"{self.name}: no answer in {deadline:g} s")
            with trio.CancelScope(shield=True), trio.move_on_after(deadline):
                try:
                    if msg.request.file is None:
                        result = await self.send(msg.request)
                    else:
                        async with self._files:
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
        self.nursery.start_soon(self._connection)

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Send):
            await self._sends.acquire()  # backpressure: the mailbox waits, not a task pile
            self.nursery.start_soon(self._send, msg)
            return None
        if isinstance(msg, TurnStep):
            return await self.show(msg)
        if isinstance(msg, Fetch):
            self.nursery.start_soon(self._fetch, msg)
            return None
        if isinstance(msg, WebhookRequest):
            return await self.webhook(msg)
        raise TypeError(f"{self.name} cannot handle {type(msg).__name__}")

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        """A request to this platform's `/webhooks/<name>[/<rest>]` (the listener calls only
        the adapters of platforms whose record says `webhook`): verified and admitted
        before it is answered. A platform that takes none has no such webhook."""
        return NO_SUCH_WEBHOOK

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Save the files an authorized event carries (its `attachments`, as this adapter
        made them) into the cache. A platform without media has none to fetch."""
        return Fetched((), tuple(f"[{self.platform} cannot fetch {a}]" for a in attachments))

    async def _fetch(self, msg: Fetch) -> None:
        try:
            async with self._files:
                msg.reply.set(await self.fetch(msg.attachments))
        except Exception as exc:
            msg.reply.fail(exc)

    async def _connection(self) -> None:
        """Connections one after another for this incarnation's life: one that returned
        is followed by the next, paced; a crash or a missed deadline raises (the
        supervisor restarts the actor); a fatal error stops the actor."""
        while True:
            why = await self._connect_once()
            if why is None:
                return
            await self._pace(why)

    async def _connect_once(self) -> str | None:
        """One `connect()` under its own cancel scope and watchdog: why it ended, or None
        when the adapter is fatal (its connection's end, or a send's refused token)."""
        self._settled = False
        self._last = trio.current_time()
        watch = trio.CancelScope()
        with trio.CancelScope() as connection:
            self._current = connection
            self.nursery.start_soon(self._watch, connection, watch)
            try:
                why = await self.connect() or f"{self.platform}: the connection ended"
                return None if self.status.state == FATAL else why
            except Exception as exc:
                if self.status.state == FATAL:  # a send found the token refused meanwhile
                    return None
                ended = _found_in(exc, ConnectionEnded)
                if ended is not None:
                    return str(ended)
                fatal = _found_in(exc, AdapterFatal)
                if fatal is None:
                    self.status.state, self.status.reason = BACKING_OFF, _describe(exc)
                    if _from_outside(exc):
                        raise ConnectionFailed(f"{self.platform}: {_describe(exc)}") from exc
                    raise
                self.fatal(fatal.reason)
                return None
            finally:
                watch.cancel()
                self._current = None
        if self.status.state == FATAL:  # ended by `fatal`, not by the watchdog
            return None
        why = f"no progress for {self.progress_deadline:g} s"
        self.status.state, self.status.reason = BACKING_OFF, why
        raise ProgressLost(f"{self.name}: {why}")

    async def _pace(self, why: str) -> None:
        """Before the next connection: none after one that settled; after one that ended
        early, a jittered wait that grows with each early failure in a row."""
        if self._settled:
            log.info("%s: %s; connecting again", self.name, why)
            self.status.state, self.status.reason = CONNECTING, why
            return
        self.status.early_failures += 1
        wait = self.reconnect_backoff.delay(self.status.early_failures, self._rng)
        self.status.state = BACKING_OFF
        self.status.reason = f"{why}; connecting again in {wait:.1f} s"
        log.warning(
            "%s: %s (early failure %d in a row)",
            self.name,
            self.status.reason,
            self.status.early_failures,
        )
        await trio.sleep(wait)
        self.status.state, self.status.reason = CONNECTING, None

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
    poll offset), the directory it saves media in (its own under the cache; None: it saves
    none), and where a send it took and later failed is reported."""

    name: str
    config: PlatformConfig
    secrets: Secrets
    status: LinkStatus
    admit: Admit
    cursors: Cursors | None = None
    cache: Path | None = None
    media: MediaLimits = DEFAULT_LIMITS  # how much of it, per file and in all
    # What a platform reports later of a send it took (a WhatsApp `failed` status): told
    # here, it is committed before the adapter acknowledges the report.
    undelivered: Callable[[DeliveryFailed], Awaitable[None]] | None = None
    # How long the inbound journal remembers an event (retention.journal_days): a delivery
    # older than this would be taken for new, so it is refused by its own timestamp.
    journal_days: float = 7.0
    # The users gateway.owners and gateway.allowed_users name on this platform: let in on
    # every platform (an adapter that gates cost before the gateway decides, email's,
    # counts them as its own section's).
    named_users: frozenset[str] = frozenset()
    # For a platform that answers within the request (the API): the answer recorded for one
    # of its events (by event id), so a request sent again is answered once, from the turn
    # that ran; None while there is none (the turn runs, or waits to be resumed).
    recorded: Callable[[str], Awaitable[Recorded | None]] | None = None
    # For a platform that listens on a port of its own: told the port it bound (written to
    # HERMES_HOME/<name>.port, where its clients and the tests find it).
    bound: Callable[[int], None] = lambda _port: None
    # The name of the model serve's agent answers with (model.model), for a platform that
    # names it to its clients.
    model: str = ""


AdapterFactory = Callable[[AdapterSetup], "PlatformAdapter"]


def required(
    secrets: Secrets, variable: str | None, platform: str, setting: str = "token_env"
) -> str:
    """The secret `variable` holds (a token, a password); AdapterFatal naming what to set
    when it is unset: the one "no token" error of every platform."""
    value = secrets.get(variable)
    if not value:
        raise AdapterFatal(f"no token: set {variable or f'platforms.{platform}.{setting}'}")
    return value


E = TypeVar("E", bound=BaseException)


def _found_in(exc: BaseException, kind: type[E]) -> E | None:
    """The `kind` that ended a connection, also from inside an exception group (a
    connection that runs tasks of its own)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _found_in(inner, kind)) is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
