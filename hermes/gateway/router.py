"""The router: every inbound event's way from the journal to an answer.

Adapters admit events into the journal and cast them here. The router claims each one
(so it is taken once) and asks intake (hermes/gateway/intake.py) what becomes of it:
refused, rate-limited, a command it answers itself, a part of a burst held for the rest,
or a turn that starts, queues or steers in its session's actor. Every event it takes
ends with one final step on the reply interface and, where the user should hear
something, one answer.

At start it takes what the journal holds: events admitted and never taken, and turns a
gone router started and never answered, resumed once (as the turns they were) when
younger than `gateway.resume_window`. While draining, new events get the drain notice and
waiting bursts go at once; turns in flight get until the drain deadline, then are
cancelled and left resumable, except one running a terminal command when the drain
began (it may be what asked for the restart)."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from pathlib import Path
from typing import Any

import trio

from hermes.actors.actor import Actor
from hermes.actors.clock import Clock
from hermes.adapters.contract import InboundEvent, StepKind
from hermes.adapters.settings import Busy
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore
from hermes.config import Role
from hermes.delivery.replies import Replies
from hermes.delivery.session_keys import Keying
from hermes.gateway.admission import Admitted, Intake
from hermes.gateway.approvals import Approvals, ApprovalWaits, expire_left
from hermes.gateway.arrivals import Arrivals
from hermes.gateway.bursts import Burst, Bursts, resumed_turns
from hermes.gateway.command_context import CommandContext, refused_in_shared
from hermes.gateway.commands import answer_command
from hermes.gateway.gate import Gate
from hermes.gateway.housekeeping import Housekeeping, OwnersCache
from hermes.gateway.inbound_media import MediaIntake
from hermes.gateway.intake import Command, Limited, Merge, Refuse, Routing, dispatch, route, screen
from hermes.gateway.journal import (
    ANSWERED,
    REFUSED,
    admitted,
    claim_interrupted,
    joined_to,
    owner_gone,
)
from hermes.gateway.people import People
from hermes.gateway.questions import Questions
from hermes.gateway.rate_limit import InboundLimit
from hermes.gateway.roles import owner_ids, role_of
from hermes.gateway.router_messages import Mirrored, PairingChanged
from hermes.gateway.session_host import SessionHost, SessionServices
from hermes.gateway.settings import Config
from hermes.gateway.turn_follower import TurnFollower
from hermes.gateway.turn_starter import TurnStarter
from hermes.operations.context import Live, Offline, Ops
from hermes.state.db import Db
from hermes.state.pairing import owners
from hermes.state.registry import Registry

log = logging.getLogger(__name__)
STOPPED_BURST = "stopped with /stop before it began"


class Router(Actor):
    mailbox_size = 64

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        home_root: Path,
        memories: Path,
        agent: Agent,
        config: Config,
        replies: Replies,
        owner: str,
        clock: Clock,
        services: SessionServices | None = None,
        name: str = "gateway",
        approval_waits: ApprovalWaits | None = None,
        live: Live | None = None,
    ) -> None:
        """`approval_waits`: the requests turns wait on, shared with `live` (the operator
        actions' way into serve, through which the chat's /approve decides too)."""
        super().__init__(name)
        self.registry, self.state_db, self.home_root = registry, state_db, home_root
        self.memories = memories  # the owner-wide files, and each user's beside them
        self.agent, self.config, self.gateway = agent, config, config.gateway
        self.replies, self.owner, self.clock = replies, owner, clock
        self.limit = InboundLimit(config.gateway.rate_limit)
        self.services = services or SessionServices()
        self.approval_waits = approval_waits or ApprovalWaits()
        self.live = live or Offline()
        self.media = MediaIntake(self.services.speech, self.services.adapter_of)
        self.turns = TurnFollower(replies)  # the turns in flight
        self.bursts = Bursts(self._go)  # parts waiting for the rest of their burst
        self.db: Db | None = None
        self.draining, self._drain_by, self._drain_asked = False, math.inf, trio.Event()
        self.arrivals = Arrivals(owner, clock)  # events to route, in arrival order
        self.owners = OwnersCache(lambda platform: self.db.read(owners, platform))

    # -- life -----------------------------------------------------------------

    async def on_start(self) -> None:
        self.db = db = await self.exits.enter_async_context(Db(self.registry, self.state_db))
        if isinstance(self.replies, contextlib.AbstractAsyncContextManager):
            await self.exits.enter_async_context(self.replies)  # what it holds open
        now = self.clock.now()
        self.gate = Gate(db, self.clock, self.config)
        self.people = People(db, self.role, self.owner_ids)
        platforms = frozenset(self.gate.policies)
        agent, waits = self.config.agent, self.approval_waits
        approvals = Approvals(
            db,
            self.clock,
            waits,
            self.owner,
            agent.approval_timeout,
            self.owner_ids,
            self.config.platforms,
            self.agent.redact,
        )
        self.questions = Questions(db, self.clock, waits, self.owner, agent.clarify_timeout)
        self.host = SessionHost(
            self.nursery,
            db,
            self.home_root,
            MemoryStore(self.memories),
            self.agent,
            self.gateway,
            agent.workdir_path(),
            self.clock,
            self.services,
            approvals,
            platforms,
            Keying.of(self.config.platforms, self.config.gateway),
            self.questions,
        )
        self.starter = TurnStarter(
            self.nursery, self.host, self.replies, self.turns, self.media, self.role, self.questions
        )
        # What waited for approval when serve stopped never runs: expired before resumes.
        self.approval_waits.reopen()
        gone = functools.partial(owner_gone, me=self.owner)
        for request in await db.write(expire_left, gone, now):
            log.info("approval %s expired: nobody waits for it any more", request.id)
        await self.questions.expire_left(gone)
        waiting = await db.read(admitted)
        resumed = await db.write(claim_interrupted, self.owner, now, self.gateway.resume_window)
        self.nursery.start_soon(self._take, waiting, resumed)
        keep = (self.owners, platforms, self.owner_ids, self.limit, self.arrivals.send)
        self.housekeeping = Housekeeping(db, self.clock, self.replies, *keep)
        for run in (self.housekeeping.run, self._close_when_drained, self.bursts.run):
            self.nursery.start_soon(run)
        self.nursery.start_soon(self.arrivals.run, db, self._arrival)

    async def _take(self, waiting: list[InboundEvent], resumed: list[InboundEvent]) -> None:
        """Turns a restart cut first, each once, in order: one turn's events (a burst's
        parts, what steered it) as that turn (hermes.gateway.bursts.resumed_turns)."""
        for burst in resumed_turns(resumed, await self.db.read(joined_to, resumed)):
            log.info("resuming %s:%s after a restart", burst.lead.platform, burst.lead.event_id)
            await self._route(burst.lead, resume=True, burst=burst)
        for event in waiting:
            await self.arrivals.send(Admitted(event))  # claimed and routed as any arrival

    def stop_intake(self) -> None:
        """Events still arrive, and get the drain notice. A turn running a terminal
        command now may be what asked for the restart: it is not resumed after it."""
        if not self.draining:
            self.turns.not_resumable_in_terminal()
        self.draining = True
        self.approval_waits.drain()  # a wait for an owner ends now, its request cancelled

    def request_drain(self, deadline: float) -> None:
        """The mailbox stays open while turns finish, so events that arrive meanwhile
        get the drain notice; it closes when they are done or at the deadline."""
        self.stop_intake()
        self._drain_by = min(self._drain_by, deadline)
        self._drain_asked.set()

    async def _close_when_drained(self) -> None:
        await self._drain_asked.wait()
        with trio.move_on_at(self._drain_by):
            await self.finish_in_flight()
        super().request_drain(self._drain_by)  # now: finish, flush (cancel what runs), end

    async def finish_in_flight(self) -> None:
        await self.arrivals.settled()
        for burst in self.bursts.take_all():  # admitted before the drain: answered now
            await self._go(burst)
        for actor, _ in list(self.host.sessions.values()):
            await actor.idle.wait()
        await self.turns.all_done()

    async def flush(self) -> None:
        """Cancel the turns still running (each records its interruption), then let go."""
        for actor, _ in list(self.host.sessions.values()):
            actor.request_drain(trio.current_time())
        try:
            for ended in list(self.host.hosting.values()):
                await ended.wait()
            await self.turns.all_done()
        finally:
            self.turns.cancel_all()

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Admitted):
            await self.arrivals.send(msg)
        elif isinstance(msg, Mirrored):
            for session_id in msg.session_ids:
                actor = self.host.session_actor(session_id)
                if actor is not None:
                    actor.reload()
        elif isinstance(msg, PairingChanged):
            self.housekeeping.look_now()
        else:
            raise TypeError(f"the router cannot handle {type(msg).__name__}")

    # -- one event --------------------------------------------------------------

    async def _arrival(self, event: InboundEvent, arrived: float | None) -> None:
        await self._route(event, arrived=arrived)

    async def _route(
        self,
        event: InboundEvent,
        resume: bool = False,
        arrived: float | None = None,
        burst: Burst | None = None,
    ) -> None:
        """A claimed event, as intake decides. A resumed one (its turn, or the burst it
        waited in, was cut by a restart) is authorized again, never a turn unasked, and
        queued behind those resumed before it: as several turns, never none, never twice.
        `arrived`: when it came in, if just now; `burst`: the parts it leads (resumed)."""
        refused = screen(event, await self.gate.screening(event, self.draining))
        if refused is not None:
            self.gate.log_refusal(event, refused.reason)
            await self.starter.end(
                event, None, StepKind.REFUSED, refused.notice, REFUSED, answer=bool(refused.notice)
            )
            return
        person = await self.people.person(event)
        who = person or (event.platform, event.user_id)  # linked accounts share one limit
        limited = None if event.platform == "local" else self.limit.take(who)
        session_id = await self.host.session_id(event, person)
        in_shared = None
        if event.text.strip().startswith("/"):  # a shared conversation's is an owner's
            in_shared = await refused_in_shared(self, event, session_id)
        window = 0.0 if resume else self.gate.merge_window(event)
        running, busy = self._state(event, session_id)
        busy = "queue" if resume else busy
        way = route(event, Routing(limited, in_shared, window, running, busy))
        if isinstance(way, Limited):
            wait = self.limit.wait(who)  # a refusal that says when to send again
            await self.starter.end(
                event, None, StepKind.REFUSED, way.notice, REFUSED, bool(way.notice), wait
            )
        elif isinstance(way, Refuse):
            await self.starter.end(event, session_id, StepKind.DONE, way.notice, ANSWERED)
        elif isinstance(way, Command):
            held = self.bursts.take(event) if way.word == "/stop" else None
            for part in held.events if held is not None else ():  # it stops what waits too
                await self.starter.end(
                    part,
                    session_id,
                    StepKind.INTERRUPTED,
                    STOPPED_BURST,
                    ANSWERED,
                    answer=part is held.lead,
                )
            reply = await answer_command(way.word, CommandContext(self, event, session_id))
            await self.starter.end(event, reply.session_id, StepKind.DONE, reply.text, ANSWERED)
        elif isinstance(way, Merge):
            full = self.bursts.add(event, window, arrived)
            if full is not None:
                await self._go(full)
        else:
            self.gate.turn_started(event)
            burst = burst or Burst([event], arrived, resume)
            await self.starter.start(burst, way, busy, session_id, person)

    async def _go(self, burst: Burst) -> None:
        """A burst whose window passed: one turn, placed as its session is now."""
        lead = burst.lead
        person = await self.people.person(lead)
        session_id = await self.host.session_id(lead, person)
        self.gate.turn_started(lead)
        running, busy = self._state(lead, session_id)
        way = dispatch(burst.text, running, busy)
        await self.starter.start(burst, way, busy, session_id, person)

    def _state(self, event: InboundEvent, session_id: str) -> tuple[bool, Busy]:
        """Whether a turn runs (or waits) in the session, and the busy mode in force."""
        actor = self.host.session_actor(session_id)
        return actor is not None and actor.busy_now(), self.busy_for(event, session_id)

    def busy_for(self, event: InboundEvent, session_id: str) -> Busy:
        """The session's /busy, else its platform's `busy`, else `gateway.busy`."""
        actor = self.host.session_actor(session_id)
        return (actor.busy if actor is not None else None) or self.gate.busy(event)

    async def role(self, event: InboundEvent) -> Role:
        """The sender's role (hermes/gateway/roles.py), the pairing owners as last read."""
        return await role_of(event, self.config, self.owners.of)

    async def owner_ids(self, platform: str) -> frozenset[str]:
        """Who may approve a command asked on `platform`, as user ids."""
        return await owner_ids(platform, self.config, self.owners.of)

    def ops(self, event: InboundEvent) -> Ops:
        """An operator action done from the chat by `event`'s sender."""
        name = f" ({event.user_name})" if event.user_name else ""
        by = f"{event.platform} {event.user_id}{name}"
        return Ops(self.db, self.clock, self.config, self.live, by)

    def detail(self) -> dict[str, Any]:
        return {"sessions": len(self.host.sessions) if self.db else 0}

    def ready_handle(self) -> Intake:
        return Intake(self.address, self.owner)
