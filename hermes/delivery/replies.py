"""How the gateway answers: the one narrow way a reply leaves hermes.

The router knows only this interface: `progress` for the steps of a turn (an
adapter that shows progress, the local endpoint, streams them; best effort,
straight to the adapter) and `answer` for what the user is sent, which goes
into the outbox (split for the platform, one row per chunk, idempotent by
the answer's key) and out through the Outbox actor. On a platform that streams
(the local endpoint) the turn's final step is the answer: its client holds the
call open for it, and the session's transcript is the durable record, so there
is nothing for the outbox to retry. Where a platform edits messages, a long
turn's progress is written into the outbox as it goes (hermes/delivery/live.py)
under the answer's own key, so the final answer edits that message: one
message, also when a restart resumes the turn.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import apsw
import attrs
import trio

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent, StepKind, Target, TurnStep
from hermes.delivery.live import STOPPED_NOTE, LiveReply, status_key
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import enqueue, write_live
from hermes.delivery.split import chunks_for
from hermes.delivery.targets import answer_target
from hermes.state.db import UsesDb
from hermes.state.errors import StateError
from hermes.state.registry import Registry

Then = Callable[[apsw.Connection, float], None]  # a caller's write (conn, now)
log = logging.getLogger(__name__)
LIVE_KEPT = 1_000  # turns followed at once before the stale are looked for
STALE = 3600.0  # seconds: a turn followed that long has ended unseen


@attrs.frozen
class Answer:
    """Where a turn's answer goes. The agent queues it (`queue`) in the transaction that
    records the assistant message holding it: an answer recorded is an answer sent,
    and a crash between the two cannot lose it. Its rows are keyed by `key`, so the
    router's own `answer` afterwards (or a resumed turn's) adds nothing."""

    target: Target
    key: str
    reply_to: str | None = None
    prefix: str = ""  # said before the text (a turn answered after a restart)
    after: float = 0.0  # where its turn's progress is a message: the final edit's interval
    hold: float = 0.0  # seconds its text waits for a voice note sent instead of it

    def queue(self, conn: apsw.Connection, text: str, now: float, kind: str = "reply") -> list[int]:
        """Its rows queued (or, where its turn's progress is a message under its key, that
        message finished with it); the ids of rows that wait to go (none when it was
        queued before)."""
        chunks = chunks_for(self.prefix + text, self.target.platform)
        return enqueue(
            conn,
            self.target,
            chunks,
            kind,
            self.key,
            now,
            self.reply_to,
            after=self.after,
            hold=self.hold,
        )


class Replies(Protocol):
    async def progress(self, step: TurnStep) -> None:
        """A step of a turn (addressed: its `target` set), in order; waits while its
        adapter is behind; lost when the adapter is down."""

    def planned(self, source: InboundEvent, key: str, prefix: str = "") -> Answer | None:
        """The answer a turn for `source` queues with its final message, to where answers
        to it go (hermes.delivery.targets.answer_target); None where the turn's final
        step carries it (a streaming platform) or it goes nowhere."""

    async def answer(
        self,
        source: InboundEvent | None,
        target: Target | None,
        text: str,
        key: str,
        then: Then | None = None,
    ) -> None:
        """Send `text` to `target` (in reply to `source`, if any; None: nowhere, only
        `then`); `key` is stable for this answer across retries and restarts. `then`: the
        caller's write, committed with the answer's rows (the router closes the event's
        journal row with it)."""


class OutboxReplies(UsesDb):
    """Held open by the router (`async with`: a state.db handle)."""

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        adapter_of: Callable[[str], Address | None],
        outbox: Callable[[], Address | None],
        clock: Clock,
        streamed: frozenset[str] = frozenset({"local"}),
        progress: Mapping[str, str] | None = None,
        interval: float = 1.5,
        holds: Mapping[str, float] | None = None,
    ) -> None:
        """`progress`: each platform's progress mode, `tools` or `stream` (a platform not
        in it: `off`); `interval`: gateway.progress_interval; `holds`: the seconds a turn's
        answer waits, by platform, for the voice note sent instead of it."""
        self.holds = dict(holds or {})
        self.clock = clock
        self.streamed = streamed
        super().__init__(registry, state_db)
        self.adapter_of = adapter_of
        self.outbox = outbox
        self.modes = dict(progress or {})
        self.interval = interval
        self.live: dict[tuple[str, str], LiveReply] = {}  # by (platform, event id)

    async def progress(self, step: TurnStep) -> None:
        """A streaming platform gets every step, and the turn waits while its adapter
        is behind (back-pressure up to the model's stream; the adapter bounds how long
        a stuck client can hold it). The others get only the final step (it ends their
        typing indicator): nothing shows the rest."""
        if step.target is None:
            return
        mode = self.modes.get(step.target.platform)
        if mode is not None and step.target.platform not in self.streamed:
            await self._show(step, mode)
        if not (step.final or step.target.platform in self.streamed):
            return
        adapter = self.adapter_of(step.target.platform)
        if adapter is None:
            return
        with contextlib.suppress(ActorStopped):
            await adapter.cast(step)

    async def _show(self, step: TurnStep, mode: str) -> None:
        """A step of a turn on a platform that edits: its progress message follows it.
        At the end, `stream`'s message is the answer's to finish (or, /stop, it says it
        stopped; cut by a restart, the resumed turn finishes it); `tools`' is finished
        here."""
        platform, now = step.target.platform, trio.current_time()
        if step.final:
            live = self.live.pop((platform, step.event_id), None)
            if live is None or not live.shown:
                return
            if live.mode == "tools":
                await self._write(live, live.text(), final=True)
            elif step.kind is StepKind.INTERRUPTED:  # /stop; or a drain: resumed, it goes on
                await self._write(live, live.said() + STOPPED_NOTE, final=False)
            elif step.kind is StepKind.DONE and not step.text:  # no answer to finish it
                await self._write(live, live.said() or STOPPED_NOTE.strip(), final=True)
            return
        live = self.live.get((platform, step.event_id))
        if live is None:  # planned() begins each turn's; none: one the stale cap let go
            return
        live.take(step)
        if live.due(now, self.interval, step):
            live.written, live.shown = now, live.text()
            await self._write(live, live.shown, final=False)

    async def _write(self, live: LiveReply, text: str, final: bool) -> None:
        """Best effort, as progress is: a turn goes on when its progress cannot be shown."""
        chunks = chunks_for(text, live.target.platform)
        try:
            waiting = await self.db.write(
                write_live,
                live.target,
                chunks,
                live.key,
                self.clock.now(),
                live.reply_to,
                final,
                self.interval,
            )
        except (ActorStopped, StateError) as exc:
            log.warning("the progress of %s is not shown: %s", live.key, exc)
            return
        if waiting:
            nudge(self.outbox())

    def planned(self, source: InboundEvent, key: str, prefix: str = "") -> Answer | None:
        target = answer_target(source)
        if source.platform in self.streamed or target is None:
            return None
        own = target == source.target()  # else an answer sent elsewhere: no progress there
        reply_to = source.message_id if own else None
        mode = self.modes.get(source.platform) if own else None
        if mode is not None:  # the turn begins: its progress is followed, timed from now
            if len(self.live) >= LIVE_KEPT:  # a turn whose end never came (a crashed session)
                stale = trio.current_time() - STALE
                self.live = {k: v for k, v in self.live.items() if v.began > stale}
            live_key = key if mode == "stream" else status_key(key)
            self.live[source.platform, source.event_id] = LiveReply(
                target, live_key, reply_to, mode, trio.current_time()
            )
        return Answer(
            target, key, reply_to, prefix, self.interval, self.holds.get(target.platform, 0.0)
        )

    async def answer(
        self,
        source: InboundEvent | None,
        target: Target | None,
        text: str,
        key: str,
        then: Then | None = None,
    ) -> None:
        if target is None:  # nowhere: the session's transcript keeps it
            queued = False
        else:  # on a streaming platform its final step carried it
            queued = bool(text) and target.platform not in self.streamed
        if not queued and then is None:
            return
        own = source is not None and target == source.target()
        reply_to = source.message_id if own else None
        kind = "reply" if source is not None else "notice"

        def write(conn: apsw.Connection, now: float) -> list[int]:
            added = []
            if queued and target is not None:
                added = Answer(target, key, reply_to, after=self.interval).queue(
                    conn, text, now, kind
                )
            if then is not None:
                then(conn, now)
            return added

        if await self.db.write(write, self.clock.now()):  # none added: already on its way
            nudge(self.outbox())
