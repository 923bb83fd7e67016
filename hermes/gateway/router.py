"""The router: every inbound event's way from the journal to an answer.

Adapters admit events into the journal and cast them here. The router claims
each one (so it is taken once), authorizes it, answers commands itself, and
hands the rest to the session actor of its session (started on demand,
stopped when idle). Every event it takes ends with one final step on the
reply interface and, where the user should hear something, one answer.

At start it takes what the journal holds: events admitted and never taken,
and turns a gone router started and never answered, resumed once when they
are younger than `gateway.resume_window`. While draining, new events get the
drain notice; turns in flight get until the drain deadline, then are
cancelled and left resumable, except one that was running a terminal command
when the drain began (it may be what asked for the restart).
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent, StepKind, TurnStep
from hermes.adapters.registry import PLATFORMS
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore
from hermes.agent.turn_times import TurnTimes
from hermes.agent.untrusted import of_sender
from hermes.config import Config, PlatformConfig, Role
from hermes.delivery.replies import Replies
from hermes.gateway.admission import Admitted, Intake
from hermes.gateway.approvals import Approvals, ApprovalWaits, expire_left
from hermes.gateway.authorization import decide
from hermes.gateway.command_table import ROUTER_COMMANDS, word_of
from hermes.gateway.commands import CommandContext, answer_command, refused_in_shared
from hermes.gateway.housekeeping import Housekeeping, OwnersCache
from hermes.gateway.inbound_media import MediaIntake
from hermes.gateway.journal import (
    ANSWERED,
    REFUSED,
    admitted,
    claim,
    claim_interrupted,
    closing,
    owner_gone,
)
from hermes.gateway.rate_limit import InboundLimit
from hermes.gateway.roles import owner_ids, role_of
from hermes.gateway.session_actor import Turn
from hermes.gateway.session_host import SessionHost, SessionServices
from hermes.gateway.turn_follower import RESUMED_PREFIX, Following, TurnFollower
from hermes.operations.context import Live, Offline, Ops
from hermes.state.db import Db
from hermes.state.pairing import (
    approved_users,
    owners,
    request_code,
)
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

DRAIN_NOTICE = "hermes is shutting down; send your message again in a moment"
TURN_STEPS = 16  # steps of a turn not yet passed on; the turn waits while it is full

LOCAL_POLICY = PlatformConfig(allow_all_users=True, group_policy="open", require_mention=False)


def policies(config: Config) -> dict[str, PlatformConfig]:
    """Each platform's access settings; the local endpoint is gated by its token alone."""
    return {"local": LOCAL_POLICY, **config.enabled_platforms()}


@attrs.frozen
class Mirrored:
    """The outbox wrote a brief into these sessions: a live one reads its transcript
    again before its next turn, so a reply to the brief sees it."""

    session_ids: tuple[str, ...]


@attrs.frozen
class PairingChanged:
    """An operator approved someone: tell them they are in, now."""


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
        self.registry = registry
        self.state_db = state_db
        self.home_root = home_root
        self.memory = MemoryStore(memories)  # the owner-wide files
        self.host: SessionHost | None = None  # the session actors, from on_start
        self.limit = InboundLimit(config.gateway.rate_limit)
        self.agent = agent
        self.config = config
        self.gateway = config.gateway
        self.replies = replies
        self.owner = owner
        self.clock = clock
        self.services = services or SessionServices()
        self.approval_waits = approval_waits or ApprovalWaits()
        self.live = live or Offline()
        self.approvals: Approvals | None = None
        self.policies = policies(config)
        self.media = MediaIntake(self.services.speech, self.services.adapter_of)
        self.global_allowed = frozenset(config.gateway.allowed_users)
        self.turns = TurnFollower(replies)  # the turns in flight
        self._refusals_logged: set[tuple[str, str, str]] = set()
        self.db: Db | None = None
        self.draining = False
        self._drain_by = math.inf
        self._drain_asked = trio.Event()
        # Events to route, as admission told them (an event taken from the journal: unclaimed).
        self._arrived, self._arrivals = trio.open_memory_channel[Admitted](256)
        self._arrivals_idle = trio.Event()
        self.owners = OwnersCache(lambda platform: self.db.read(owners, platform))
        self.housekeeping: Housekeeping | None = None  # from on_start

    # -- life -----------------------------------------------------------------

    async def on_start(self) -> None:
        self.db = await self.exits.enter_async_context(Db(self.registry, self.state_db))
        if isinstance(self.replies, contextlib.AbstractAsyncContextManager):
            await self.exits.enter_async_context(self.replies)  # what it holds open
        now = self.clock.now()
        self.approvals = Approvals(
            self.db, self.clock, self.approval_waits, self.owner,
            self.config.agent.approval_timeout, self.owner_ids, self.config.platforms,
            self.agent.redact,
        )  # fmt: skip
        self.host = SessionHost(
            self.nursery, self.db, self.home_root, self.memory, self.agent, self.gateway,
            self.config.agent.workdir_path(), self.clock, self.services, self.approvals,
            frozenset(self.policies),
        )  # fmt: skip
        # What waited for approval when serve stopped never runs: expired before resumes.
        self.approval_waits.reopen()
        for request in await self.db.write(expire_left, self._gone, now):
            log.info("approval %s expired: nobody waits for it any more", request.id)
        waiting = await self.db.read(admitted)
        resumed = await self.db.write(
            claim_interrupted, self.owner, now, self.gateway.resume_window
        )
        self.nursery.start_soon(self._take, waiting, resumed)
        self.housekeeping = Housekeeping(
            self.db, self.clock, self.replies, self.owners, frozenset(self.policies),
            self.owner_ids, self.limit, self._arrived.send,
        )  # fmt: skip
        self.nursery.start_soon(self.housekeeping.run)
        self.nursery.start_soon(self._close_when_drained)
        self.nursery.start_soon(self._route_arrivals)

    def _gone(self, owner: str) -> bool:
        return owner_gone(owner, self.owner)

    async def _take(self, waiting: list[InboundEvent], resumed: list[InboundEvent]) -> None:
        for event in resumed:
            log.info("resuming %s:%s after a restart", event.platform, event.event_id)
            await self._route(event, resume=True)
        for event in waiting:
            await self._arrived.send(Admitted(event))  # claimed and routed as any arrival

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
        while not self._arrivals_idle.is_set() or self._arrivals.statistics().current_buffer_used:
            await self._arrivals_idle.wait()
            await trio.lowlevel.checkpoint()
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
            await self._arrived.send(msg)
            return None
        if isinstance(msg, Mirrored):
            for session_id in msg.session_ids:
                actor = self.host.session_actor(session_id)
                if actor is not None:
                    actor.reload()
            return None
        if isinstance(msg, PairingChanged):
            if self.housekeeping is not None:
                self.housekeeping.look_now()
            return None
        raise TypeError(f"the router cannot handle {type(msg).__name__}")

    async def _route_arrivals(self) -> None:
        """Events in arrival order. Admission claimed most for this router already; the
        claims of the others that wait are queued together (one commit for the lot),
        then each is routed in order."""
        while True:
            self._arrivals_idle.set()
            batch = [await self._arrivals.receive()]
            self._arrivals_idle = trio.Event()
            while len(batch) < 64:
                try:
                    batch.append(self._arrivals.receive_nowait())
                except trio.WouldBlock:
                    break
            now = self.clock.now()
            claims = [
                None if told.owner == self.owner else await self.db.submit(
                    claim, told.event.platform, told.event.event_id, self.owner, now
                )
                for told in batch
            ]  # fmt: skip
            for told, pending in zip(batch, claims, strict=True):
                # Not claimed: taken already (a duplicate, another router).
                if pending is None or await pending.result():
                    await self._route(told.event, arrived=told.arrived)

    # -- one event --------------------------------------------------------------

    async def _route(
        self, event: InboundEvent, resume: bool = False, arrived: float | None = None
    ) -> None:
        """A claimed event: refused, a command, or a turn. A resumed one (its turn was
        cut by a restart) goes the same way: authorized again, never a turn unasked.
        `arrived`: when it came in, if just now (its turn's overhead is measured)."""
        now = self.clock.now()
        if await self._refused(event, now):
            return  # authorized first: a stranger or a bot never gets the drain notice
        if self.draining:
            await self._end(event, None, StepKind.REFUSED, DRAIN_NOTICE, REFUSED)
            return
        if event.platform != "local":  # the token holder: the operator's own client
            verdict = self.limit.take((event.platform, event.user_id))
            if verdict is not None:
                await self._end(
                    event, None, StepKind.REFUSED, verdict, REFUSED, answer=bool(verdict)
                )
                return
        text = event.text.strip()
        word = word_of(text)
        if text.startswith("/"):  # an owner's shared conversation is not a user's to change
            session_id = await self.host.session_id(event)
            refusal = await refused_in_shared(self, event, session_id)
            if refusal is not None:
                await self._end(event, session_id, StepKind.DONE, refusal, ANSWERED)
                return
        if word in ROUTER_COMMANDS:
            session_id = await self.host.session_id(event)
            reply = await answer_command(word, CommandContext(self, event, session_id))
            await self._end(event, reply.session_id, StepKind.DONE, reply.text, ANSWERED)
            return
        await self._turn(event, text, resume=resume, arrived=arrived)

    async def _refused(self, event: InboundEvent, now: float) -> bool:
        """Whether authorization refuses the event (and it was handled as such)."""
        policy = self.policies.get(event.platform)
        if policy is None:
            self._log_refusal(event, "no such platform is configured")
            await self._end(event, None, StepKind.REFUSED, "", REFUSED, answer=False)
            return True
        decision = decide(event, policy, frozenset(), self.global_allowed)
        if not decision.allowed:  # only then can pairing's approvals change the answer
            approved = await self.db.read(approved_users, event.platform)
            decision = decide(event, policy, approved, self.global_allowed)
        if decision.allowed:
            return False
        self._log_refusal(event, decision.reason)
        text = ""
        if decision.offer_pairing:  # one code an hour per user: "" (nothing) meanwhile
            offer = await self.db.write(
                request_code, event.platform, event.user_id, event.user_name, now, event.chat_id
            )
            text = offer.message(now)
        await self._end(event, None, StepKind.REFUSED, text, REFUSED, answer=bool(text))
        return True

    def _log_refusal(self, event: InboundEvent, reason: str) -> None:
        key = (event.platform, event.user_id, reason)
        if key in self._refusals_logged:
            return
        if len(self._refusals_logged) > 10_000:
            self._refusals_logged.clear()
        self._refusals_logged.add(key)
        log.info(
            "refused %s user %s in %s %s: %s",
            event.platform, event.user_id, event.chat_type, event.chat_id, reason,
        )  # fmt: skip

    async def _end(
        self,
        event: InboundEvent,
        session_id: str | None,
        kind: StepKind,
        text: str,
        state: str,
        answer: bool = True,
    ) -> None:
        """The event's final step, its answer, and its journal row closed."""
        target = event.target()
        step = TurnStep(kind, text, event_id=event.event_id, target=target, session_id=session_id)
        await self.replies.progress(step)
        closed = closing(event.platform, event.event_id, state, session_id)
        key = f"{event.platform}:{event.event_id}"
        await self.replies.answer(event, target, text if answer else "", key, then=closed)

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
        return {"sessions": len(self.host.sessions) if self.host else 0}

    def ready_handle(self) -> Intake:
        return Intake(self.address, self.owner)

    # -- turns ------------------------------------------------------------------

    async def _turn(
        self, event: InboundEvent, text: str, resume: bool = False, arrived: float | None = None
    ) -> None:
        session_id = await self.host.session_id(event)
        send, events = trio.open_memory_channel[TurnStep](TURN_STEPS)
        key = f"{event.platform}:{event.event_id}"
        answer = self.replies.planned(event, key, RESUMED_PREFIX if resume else "")
        # The event's journal row closes in the transaction of the turn's final message.
        settle = closing(event.platform, event.event_id, ANSWERED, session_id)
        role = await self.role(event)
        known = PLATFORMS.get(event.platform)  # a mail's body quotes others: never trusted
        untrusted = of_sender(role, event.platform, event.user_id) or (
            known.foreign_text if known is not None else None
        )
        times = TurnTimes(arrived) if arrived is not None else None
        follow = Following(event, session_id, resume, times, settle, queued=answer is not None)
        self.turns.begin(follow)
        self.nursery.start_soon(self.turns.follow, follow, events)
        try:
            turn = Turn(text, send, resume=resume, answer=answer, settle=settle, times=times,
                        untrusted=untrusted)  # fmt: skip
            try:
                await self._hand(session_id, event, role, turn)
            except ActorStopped:  # it stopped for idleness a moment ago: start it again
                self.host.sessions.pop(session_id, None)
                await self._hand(session_id, event, role, turn)
        except BaseException:
            send.close()  # no turn will send its events
            raise

    async def _hand(self, session_id: str, event: InboundEvent, role: Role, turn: Turn) -> None:
        """The turn to its session's actor (started if need be), as the sender's."""
        address = await self.host.address(session_id, event)
        actor = self.host.sessions[session_id][0]
        ctx = self.host.turn_context(actor, event, role)
        await address.cast(attrs.evolve(turn, ctx=ctx, media=self.media.for_event(event)))
