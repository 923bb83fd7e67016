"""The Outbox actor: the one way out. It sends the outbox's rows through the adapters.

In order per chat (one send in flight per chat), concurrently across chats,
under per-platform and per-chat pacing. A 429's retry-after sets the row's
not-before (or the whole platform's, when the platform says the limit is
global); nothing sleeps on an adapter's receive path, and other chats keep
going. Network errors and 5xx retry with jittered backoff until the row is
older than the freshness limit; permanent errors are dead at once. It wakes
when rows are queued (`Enqueued`), when a not-before passes, or when a chat's
sends end with something left to look at: no polling tick.

What a send costs in state.db: a row is `sending` (committed) before its request
leaves and `sent` only once the platform answered it. The commit that records a
row's outcome also takes the chat's next row for its send when its pace slot is
free now (never earlier: a row waiting for its slot stays `pending`, so a restart
sends it), so a chat's later chunks cost one commit each; concurrent chats'
marks share the writer's group commit.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
from prometheus_client import Counter

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.actors.backoff import Backoff
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.actors.reply import Reply
from hermes.adapters.contract import (
    SEND_DEADLINE,
    Permanent,
    RetryAfter,
    Send,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.platform import Pace
from hermes.adapters.registry import PLATFORMS
from hermes.adapters.settings import GatewayConfig
from hermes.delivery.outbox_store import (
    SENDING,
    OutboxRow,
    due,
    mark_dead,
    mark_missing,
    mark_plain,
    mark_retry,
    mark_sending,
    mark_sent,
    mark_unknown,
    next_in_chat,
    next_not_before,
    recover,
)
from hermes.delivery.session_keys import PER_USER, Keying
from hermes.state.db import Db
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

SENDS = Counter(
    "hermes_messages_out", "Sends by platform and what the platform said", ["platform", "outcome"]
)

FRESHNESS = 24 * 3600.0  # a reply that old is noise
HANDOVER = 5.0  # past the adapter's SEND_DEADLINE: its answer on the way back
RETRY_BACKOFF = Backoff(minimum=1.0, maximum=300.0)


PACES: dict[str, Pace] = {name: p.pace for name, p in PLATFORMS.items() if p.pace}
NO_PACE = Pace()


@attrs.frozen
class Enqueued:
    """Rows were added: look again."""


def nudge(outbox: Address | None) -> None:
    """Tell the Outbox actor rows were queued (it also looks at its start)."""
    if outbox is None:
        return
    with contextlib.suppress(ActorStopped, trio.WouldBlock):
        outbox.cast_nowait(Enqueued())  # a full mailbox already holds a nudge


class _Clock:
    """Send slots by key (a platform, a chat), as a generic cell rate: a key at `rate`
    with `burst` may send once its theoretical next time, less burst - 1 intervals,
    has come. A send takes its slot in every key at one start time, so a slot one key
    grants and another delays is not spent on nothing."""

    KEEP = 10_000  # keys remembered; past that, the ones that have caught up are dropped

    def __init__(self) -> None:
        self.next: dict[Any, float] = {}

    def start(self, limits: list[tuple[Any, float, int]], now: float) -> float:
        """When a send limited by each (key, rate, burst) may start; reserves nothing."""
        start = now
        for key, rate, burst in limits:
            if not math.isinf(rate):
                start = max(start, self.next.get(key, now) - (burst - 1) / rate)
        return start

    def take(self, limits: list[tuple[Any, float, int]], now: float) -> float:
        """When a send limited by each (key, rate, burst) may start; reserves it."""
        start = self.start(limits, now)
        for key, rate, _ in limits:
            if not math.isinf(rate):
                self.next[key] = max(self.next.get(key, now), start) + 1.0 / rate
        if len(self.next) > self.KEEP:
            self.next = {key: t for key, t in self.next.items() if t > now}
        return start


class Outbox(Actor):
    mailbox_size = 256

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        adapter_of: Callable[[str], Address | None],
        deduplicating: frozenset[str] = frozenset(),
        paces: Mapping[str, Pace] = PACES,
        freshness: float = FRESHNESS,
        name: str = "outbox",
        rng: random.Random | None = None,
        clock: Clock | None = None,
        keying: Keying = PER_USER,
        progress_interval: float = GatewayConfig().progress_interval,
        mirrored: Callable[[list[str]], Awaitable[None]] | None = None,
        watch_other_writers: float | None = None,
    ) -> None:
        """`watch_other_writers`: look at state.db this often even unasked, for a second
        serve on the same home (--no-lock), whose rows this one is never told about;
        None (one serve): look only when told (Enqueued) or when a row comes due."""
        super().__init__(name)
        self.registry = registry
        self.state_db = state_db
        self.adapter_of = adapter_of
        self.deduplicating = deduplicating
        self.paces = paces
        self.freshness = freshness
        self.rng = rng or random.Random()
        self.clock = clock or Clock()
        self.keying = keying  # how a mirrored brief's sessions are keyed
        self.progress_interval = progress_interval
        self.mirrored = mirrored  # told which sessions a mirror wrote to
        self.watch = math.inf if watch_other_writers is None else watch_other_writers
        self.db: Db | None = None
        self.busy: set[tuple[str, str]] = set()  # chats with a send in flight
        self.passed: set[tuple[str, str]] = set()  # busy chats the dispatcher passed over
        self.held: dict[str, float] = {}  # platform -> not before (a global 429)
        self._wake = trio.Event()
        self._slots = _Clock()
        self._draining = False
        self._drained = trio.Event()

    async def on_start(self) -> None:
        self.db = await self.exits.enter_async_context(Db(self.registry, self.state_db))
        now = self.clock.now()
        done = await self.db.write(recover, self.deduplicating, now, self.freshness)
        if any(done.values()):
            log.info("outbox after the restart: %s", done)
        self.nursery.start_soon(self._dispatch_loop)

    def stop_intake(self) -> None:
        """Keep sending through the drain: turns that finish in it are answered."""

    async def finish_in_flight(self) -> None:
        """Asked to stop (after the router and the scheduler): send what is due now, then
        end; rows not started by the deadline stay for the next start."""
        self._draining = True
        self._wake.set()
        await self._drained.wait()

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Enqueued):
            self._wake.set()
            return None
        raise TypeError(f"the outbox cannot handle {type(msg).__name__}")

    async def _dispatch_loop(self) -> None:
        while True:
            self._wake = trio.Event()
            now = self.clock.now()
            started = False
            rows, wake_at = await self.db.read(_look, now)
            for row in rows:
                if row.chat in self.busy:
                    self.passed.add(row.chat)  # its sender looks again when it ends
                    continue
                if self.held.get(row.target.platform, 0.0) > now:
                    continue
                self.busy.add(row.chat)
                self.nursery.start_soon(self._send, row)
                started = True
            if self._draining and not started and not self.busy:
                self._drained.set()
                return
            held = [t for t in self.held.values() if t > now]
            soonest = min([t for t in (wake_at, *held) if t is not None], default=math.inf)
            wait = min(max(0.0, soonest - self.clock.now()), self.watch)
            with trio.move_on_after(wait):
                await self._wake.wait()

    async def _send(self, row: OutboxRow) -> None:
        """Send a chat's rows in order while they are due; one such task per busy chat.
        A failure here (state.db gone) ends this chat's turn, not the outbox: the row
        stays as it was, for the next look or the next start. A chat that ends with
        nothing more due needs no look, unless the dispatcher passed it over or the row it
        sent last is a live message's (a newer text may wait an interval to follow it)."""
        chat = row.chat
        settled = False
        try:
            while row is not None:
                if row.live and row.edit_of is not None and not self._free(row, chat=False):
                    # A state on the way gives way to others' first messages: it waits
                    # an interval (the latest wins then), it never takes their slot.
                    again = self.clock.now() + self.progress_interval
                    await self.db.write(mark_retry, row.id, again, "giving way", self.clock.now())
                    break
                await self._pace(row)
                if row.state != SENDING and not await self.db.write(
                    mark_sending, row.id, self.clock.now()
                ):
                    break  # another serve took it
                result = await self._attempt(row)
                row, settled = await self._record(row, result)
        except Exception:
            log.exception("outbox: sending to %s:%s failed", *chat)
        finally:
            self.busy.discard(chat)
            if not settled or self._draining or chat in self.passed:
                self.passed.discard(chat)
                self._wake.set()

    def _limits(self, row: OutboxRow) -> list[tuple[Any, float, int]]:
        """The platform's, the chat's and, for an edit, the platform's edits' rates (the
        chat's second: `_free` may leave it out)."""
        pace = self.paces.get(row.target.platform, NO_PACE)
        limits = [
            (row.target.platform, pace.per_second, pace.burst),
            (row.chat, pace.per_chat_per_second, pace.chat_burst),
        ]
        if row.edit_of is not None:
            limits.append(((row.target.platform, "edits"), pace.edits_per_second, pace.edit_burst))
        return limits

    def _free(self, row: OutboxRow, chat: bool = True) -> bool:
        """Whether the row's platform (and chat) have a slot now, without waiting."""
        limits = self._limits(row)
        if not chat:
            del limits[1]
        return self._slots.start(limits, trio.current_time()) <= trio.current_time()

    async def _pace(self, row: OutboxRow) -> None:
        """Wait for the platform's and the chat's steady-rate slot (this chat's task only)."""
        await trio.sleep_until(self._slots.take(self._limits(row), trio.current_time()))

    async def _attempt(self, row: OutboxRow) -> SendResult:
        adapter = self.adapter_of(row.target.platform)
        if adapter is None:
            return RetryAfter(None, f"no {row.target.platform} adapter is running")
        request = SendRequest(
            row.target,
            row.text,
            row.idempotency_key,
            reply_to=row.reply_to,
            plain=row.plain,
            kind=row.kind,
            buttons=row.buttons,
            edit_of=row.edit_of,
            file=row.file,
            again=row.attempts > (1 if row.state == SENDING else 0),  # counted when taken
        )
        reply = Reply()
        try:
            with trio.move_on_after(SEND_DEADLINE) as handing:
                await adapter.cast(Send(request, reply))  # its mailbox may be full: not sent
            if handing.cancelled_caught:
                return RetryAfter(None, f"the {row.target.platform} adapter is busy")
            with trio.move_on_after(request.deadline + HANDOVER):  # it answers within its own
                return await reply.wait()
            wait = request.deadline + HANDOVER
            return Unconfirmed(f"no answer from {row.target.platform} in {wait:g} s")
        except ActorStopped:
            return RetryAfter(None, f"the {row.target.platform} adapter is restarting")
        finally:
            reply.abandon()

    async def _record(self, row: OutboxRow, result: SendResult) -> tuple[OutboxRow | None, bool]:
        """Write what the platform said. A row that is done (sent, dead, unknown, or to go
        again as plain text) is marked in one write with a look at the chat's next row,
        which that write also takes for its send when its pace lets it go now: (the next
        row or None, True; False where the dispatcher must look again: a live message's
        row may wait to go again). A row that waits for a retry: (None, False)."""
        now = self.clock.now()
        _sends(row.target.platform, _outcome(result)).inc()
        if isinstance(result, Unconfirmed) and (
            row.target.platform in self.deduplicating or row.edit_of is not None
        ):
            result = RetryAfter(None, result.reason)  # a repeat is dropped, or the same edit
        if isinstance(result, Sent):
            kept = row.live or row.edit_of is not None  # a message that may be edited
            mark = (
                mark_sent,
                row.id,
                result.message_id,
                now,
                self.keying,
                row.text if kept else None,
                self.progress_interval,
                row.plain,
            )
        elif isinstance(result, Permanent) and result.missing:
            log.info("outbox row %d: its message is gone (%s)", row.id, result.reason)
            mark = (mark_missing, row.id, result.reason, now)
        elif isinstance(result, Unconfirmed):
            mark = (mark_unknown, row.id, result.reason, now)
        elif isinstance(result, Permanent) and result.formatting and not row.plain:
            log.info(
                "outbox row %d: formatting rejected (%s); as plain text", row.id, result.reason
            )
            mark = (mark_plain, row.id, result.reason, now)
        elif isinstance(result, Permanent):
            log.warning("outbox row %d to %s is dead: %s", row.id, row.target, result.reason)
            mark = (mark_dead, row.id, result.reason, now)
        elif now - row.created_at > self.freshness:
            mark = (mark_dead, row.id, f"still failing when stale: {result.reason}", now)
        else:
            # A 429 says how long; a passing fault backs off, longer each attempt.
            if result.seconds is None:
                wait = RETRY_BACKOFF.delay(row.attempts + 1, self.rng)
            else:
                wait = result.seconds
                if result.scope_wide:
                    self.held[row.target.platform] = now + wait
            await self.db.write(mark_retry, row.id, now + wait, result.reason, now)
            return None, False
        seeded, after = await self.db.write(_then_next, mark, row.chat, now, self._free(row))
        if seeded and self.mirrored is not None:
            await self.mirrored(seeded)
        # A live message's row may be pending again, its newer text to go an interval on
        # (written while it was being sent): the dispatcher must look, or nobody wakes for it.
        relook = (
            after is None and isinstance(result, Sent) and (row.live or row.edit_of is not None)
        )
        return after, not relook


@functools.cache
def _sends(platform: str, outcome: str) -> Any:
    """The SENDS counter's child for these labels, looked up once."""
    return SENDS.labels(platform, outcome)


def _outcome(result: SendResult) -> str:
    if isinstance(result, RetryAfter):
        return "rate_limited" if result.seconds is not None else "failed"
    return {Sent: "sent", Permanent: "refused", Unconfirmed: "unconfirmed"}[type(result)]


def _look(conn: Any, now: float) -> tuple[list[OutboxRow], float | None]:
    """What may go now, and when the next waiting retry may: one read, one thread hop."""
    return due(conn, now), next_not_before(conn, now)


def _then_next(
    conn: Any, mark: tuple, chat: tuple[str, str], now: float, take: bool
) -> tuple[Any, OutboxRow | None]:
    """`mark` (a store function and its arguments) on a row that is done, then the chat's
    next row if it may go now, taken for its send (`mark_sending`) when `take`: one
    transaction, one thread hop. Returns what the mark returned, and that row."""
    fn, *args = mark
    marked = fn(conn, *args)
    after = next_in_chat(conn, *chat, now)
    if after is not None and take:
        if not mark_sending(conn, after.id, now):
            return marked, None
        after = attrs.evolve(after, state=SENDING, attempts=after.attempts + 1)
    return marked, after
