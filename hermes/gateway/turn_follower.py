"""Following a turn to its end: its steps passed on to the adapter as they come, then its
answer and its journal row closed (in the transaction of its final message where the turn
wrote it, else here with the notice its end calls for).

The router starts one follow per turn it hands to a session actor; while draining it
asks which turns are in a terminal command (not resumed after the restart), waits for
them all, and at the deadline cancels what is left."""

from __future__ import annotations

import logging

import apsw
import attrs
import trio
from prometheus_client import Histogram

from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent, StepKind, TurnStep
from hermes.adapters.registry import PLATFORMS
from hermes.agent.permissions import COMMAND_TOOLS
from hermes.agent.turn_times import TurnTimes
from hermes.delivery.replies import Replies, Then
from hermes.delivery.targets import answer_target
from hermes.gateway.journal import ended_with
from hermes.state.errors import StateError

log = logging.getLogger(__name__)

RESUMED_PREFIX = "(answered after hermes restarted) "
CUT_NOTICE = "hermes restarted while answering this; please send it again"

TURN_OVERHEAD = Histogram(
    "hermes_turn_overhead_seconds",
    "What hermes adds to an answered turn: its arrival to its final step handed to the"
    " adapter, less the model's calls (request to last byte) and the tools' runs",
    buckets=(
        0.0005,
        0.001,
        0.002,
        0.003,
        0.005,
        0.0075,
        0.01,
        0.015,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1.0,
    ),
)


@attrs.define
class Following:
    """A turn in flight, as it is followed."""

    event: InboundEvent
    session_id: str
    resume: bool
    times: TurnTimes | None
    settle: Then  # closes its journal row: with its final message, else with the notice
    queued: bool = False  # its answer goes into the outbox with its final message
    in_terminal: set[str] = attrs.Factory(set)  # open terminal calls
    resumable: bool = True
    scope: trio.CancelScope = attrs.Factory(lambda: trio.CancelScope(shield=True))


class TurnFollower:
    """The turns in flight, by (platform, event id), each followed to its end."""

    def __init__(self, replies: Replies) -> None:
        self.replies = replies
        self.following: dict[tuple[str, str], Following] = {}
        self._done = trio.Event()
        self._done.set()

    def begin(self, follow: Following) -> None:
        """`follow` is in flight from now (`follow` it next)."""
        self.following[follow.event.platform, follow.event.event_id] = follow
        if self._done.is_set():  # one already waited on stays the one
            self._done = trio.Event()

    def not_resumable_in_terminal(self) -> None:
        """A drain begins: a turn running a terminal command now may be what asked for the
        restart, so it is not resumed after it."""
        for follow in self.following.values():
            if follow.in_terminal:
                follow.resumable = False

    async def all_done(self) -> None:
        await self._done.wait()

    def cancel_all(self) -> None:
        """Out of time: what was not sent is not sent."""
        for follow in list(self.following.values()):
            follow.scope.cancel()

    async def follow(self, follow: Following, events: trio.MemoryReceiveChannel[TurnStep]) -> None:
        """Pass a turn's steps on as they come, then answer and close its journal row.

        Shielded: when the router is cancelled at the drain deadline, its turns end
        with an interrupted step that must still reach the user. The turn's events
        end when its session actor does; `cancel_all` cancels what is left after that.
        Each step waits for the adapter to take it: a slow client holds its turn back."""
        event, session_id = follow.event, follow.session_id
        address = {"event_id": event.event_id, "target": event.target(), "session_id": session_id}
        final: TurnStep | None = None
        try:
            with follow.scope:
                async with events:
                    async for step in events:
                        if step.kind is StepKind.TOOL_CALL and step.tool in COMMAND_TOOLS:
                            follow.in_terminal.add(step.call_id)
                        elif step.kind is StepKind.TOOL_RESULT:
                            follow.in_terminal.discard(step.call_id)
                        shown = attrs.evolve(step, **address)
                        if step.final:
                            final = step
                            if step.kind is StepKind.DONE and follow.resume:
                                shown = attrs.evolve(shown, text=RESUMED_PREFIX + step.text)
                            elif step.kind is StepKind.CUT:
                                shown = attrs.evolve(shown, kind=StepKind.INTERRUPTED)
                        await self.replies.progress(shown)
                        if step.kind is StepKind.DONE and follow.times is not None:
                            TURN_OVERHEAD.observe(follow.times.overhead())  # handed over
                    if final is None:  # its steps ended early (its session actor crashed)
                        ended = TurnStep(StepKind.ERROR, "the turn ended early", **address)
                        await self.replies.progress(ended)  # a client waiting on it hears
                try:
                    await self._close(follow, final)
                except (ActorStopped, StateError) as exc:  # a hurried stop: state.db is gone
                    log.warning(
                        "the end of %s:%s is not recorded: %s", event.platform, event.event_id, exc
                    )
        finally:
            del self.following[event.platform, event.event_id]
            if not self.following:
                self._done.set()

    async def _close(self, follow: Following, final: TurnStep | None) -> None:
        event = follow.event
        target, key = answer_target(event), f"{event.platform}:{event.event_id}"
        kind = final.kind if final else StepKind.ERROR
        settled = final is not None and final.settled  # its journal row closed with it
        if settled and follow.queued:
            return  # and its answer's rows queued in that transaction
        if kind is StepKind.CUT and follow.resumable and not follow.resume:
            return  # a drain or a crash cut it: left started, the next start resumes it
        text = None
        if kind is StepKind.DONE and final.text:
            text = (RESUMED_PREFIX if follow.resume else "") + final.text
        elif kind is StepKind.ERROR:
            text = f"Sorry, that failed: {final.text if final else 'the turn ended early'}"
        elif kind is StepKind.CUT:
            text = CUT_NOTICE
        then = None if settled else follow.settle
        platform = PLATFORMS.get(event.platform)
        if platform is not None and platform.streams:  # a request sent again reads it
            said = final.text if final is not None and kind is not StepKind.ERROR else text
            keep = ended_with(event.platform, event.event_id, str(kind), said or "")
            then = keep if then is None else _both(then, keep)
        await self.replies.answer(event, target, text or "", key, then=then)  # one commit


def _both(first: Then, second: Then) -> Then:
    def write(conn: apsw.Connection, now: float) -> None:
        first(conn, now)
        second(conn, now)

    return write
