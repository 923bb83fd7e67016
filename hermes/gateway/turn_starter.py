"""Starting a turn for a burst (one message, or the parts that are one), followed to its
end; and ending an event that gets no turn: its one step, its answer, its journal row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent, StepKind, TurnStep
from hermes.adapters.registry import PLATFORMS
from hermes.adapters.settings import Busy
from hermes.agent.turn_times import TurnTimes
from hermes.agent.untrusted import of_sender
from hermes.config import Role
from hermes.delivery.replies import Replies
from hermes.delivery.targets import answer_target
from hermes.gateway.bursts import Burst
from hermes.gateway.inbound_media import MediaIntake
from hermes.gateway.intake import Queue, Start, Steer
from hermes.gateway.journal import ANSWERED, Closings
from hermes.gateway.questions import Questions
from hermes.gateway.session_actor import Turn
from hermes.gateway.session_host import SessionHost
from hermes.gateway.turn_follower import RESUMED_PREFIX, Following, TurnFollower

TURN_STEPS = 16  # steps of a turn not yet passed on; the turn waits while it is full


class TurnStarter:
    def __init__(
        self,
        nursery: trio.Nursery,
        host: SessionHost,
        replies: Replies,
        turns: TurnFollower,
        media: MediaIntake,
        role: Callable[[InboundEvent], Awaitable[Role]],
        questions: Questions,
    ) -> None:
        self.nursery = nursery
        self.host = host
        self.replies = replies
        self.turns = turns
        self.media = media
        self.role = role
        self.questions = questions

    async def end(
        self,
        event: InboundEvent,
        session_id: str | None,
        kind: StepKind,
        text: str,
        state: str,
        answer: bool = True,
        wait: float | None = None,
    ) -> None:
        """The event's final step, its answer, and its journal row closed. `wait`: a
        rate limit's refusal, the seconds until the sender has room again."""
        target = event.target()
        step = TurnStep(
            kind, text, event_id=event.event_id, target=target, session_id=session_id, wait=wait
        )
        await self.replies.progress(step)
        closed = Closings(state, session_id, [(event.platform, event.event_id)])
        key = f"{event.platform}:{event.event_id}"
        said = text if answer else ""
        await self.replies.answer(event, answer_target(event), said, key, then=closed)

    async def start(
        self,
        burst: Burst,
        way: Start | Queue | Steer,
        busy: Busy,
        session_id: str,
        person: str | None,
    ) -> None:
        """A turn for `burst` in its session, as `way` says, answering every part: the
        answer replies to the last part, and every part's journal row closes with it.
        `busy`: the session's mode, which a turn that starts keeps (its actor places it
        as it is when the turn arrives: a turn may have begun meanwhile)."""
        lead = burst.lead
        asked = self.questions.waits_for(session_id, lead.platform, lead.user_id)
        if asked is not None and not burst.resume:  # the turn waits on this person's answer
            by = f"{lead.platform} {lead.user_id}"
            await self.questions.answer(asked, burst.text, by, may=True)
            for event in burst.events:  # answered by the turn that asked
                await self.end(event, session_id, StepKind.DONE, "", ANSWERED, answer=False)
            return
        settle = Closings(ANSWERED, session_id, [(e.platform, e.event_id) for e in burst.events])
        if len(burst.events) > 1 and not burst.resume:  # a restart resumes them as one
            await self.host.db.write(settle.join_parts)
        send, events = trio.open_memory_channel[TurnStep](TURN_STEPS)
        key = f"{lead.platform}:{lead.event_id}"
        answer = self.replies.planned(lead, key, RESUMED_PREFIX if burst.resume else "")
        role = await self.role(lead)
        known = PLATFORMS.get(lead.platform)  # a mail's body quotes others: never trusted
        untrusted = of_sender(role, lead.platform, lead.user_id) or (
            known.foreign_text if known is not None else None
        )
        times = None
        if burst.arrived is not None:  # the merge window is not hermes's overhead
            went = min(trio.current_time(), burst.due)
            waited = max(0.0, went - burst.arrived) if burst.held else 0.0
            times = TurnTimes(burst.arrived, waited)
        follow = Following(lead, session_id, burst.resume, times, settle, answer is not None)
        self.turns.begin(follow)
        self.nursery.start_soon(self.turns.follow, follow, events)
        how = busy if isinstance(way, Start) else way.how
        text = burst.said if burst.said is not None else way.text
        try:
            turn = Turn(
                text,
                send,
                resume=burst.resume,
                answer=answer,
                settle=settle,
                times=times,
                untrusted=untrusted,
                how=how,
                source=lead.platform,
            )
            try:
                await self._hand(session_id, burst, role, person, turn)
            except ActorStopped:  # it stopped for idleness a moment ago: start it again
                self.host.sessions.pop(session_id, None)
                await self._hand(session_id, burst, role, person, turn)
        except BaseException:
            send.close()  # no turn will send its events
            raise

    async def _hand(
        self, session_id: str, burst: Burst, role: Role, person: str | None, turn: Turn
    ) -> None:
        """The turn to its session's actor (started if need be), as the sender's."""
        address = await self.host.address(session_id, burst.lead)
        actor = self.host.sessions[session_id][0]
        ctx = self.host.turn_context(actor, burst.lead, role, person)
        await address.cast(attrs.evolve(turn, ctx=ctx, media=self.media.for_events(burst.events)))
