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
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import trio
from prometheus_client import Histogram

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent, StepKind, Target, TurnStep
from hermes.adapters.registry import PLATFORMS
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore, memory_of
from hermes.agent.permissions import COMMAND_TOOLS, Caller
from hermes.agent.speech import Speech
from hermes.agent.tools.base import SessionFiles, ToolContext
from hermes.agent.turn_times import TurnTimes
from hermes.agent.untrusted import of_sender
from hermes.config import Config, PlatformConfig, Role
from hermes.delivery.replies import Replies, Then
from hermes.delivery.session_keys import new_session_id, session_key
from hermes.delivery.targets import Origin
from hermes.gateway.admission import Admitted, Intake
from hermes.gateway.approvals import Approvals, ApprovalWaits, expire_left
from hermes.gateway.authorization import decide
from hermes.gateway.commands import COMMANDS, CommandContext, answer_command, refused_in_shared
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
from hermes.gateway.session_actor import Interrupt, SessionActor, Turn
from hermes.gateway.voice_replies import VoiceReplies
from hermes.home import HermesHome
from hermes.operations.context import Live, Offline, Ops
from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.state.pairing import (
    approved_users,
    owners,
    request_code,
    to_welcome,
    welcomed,
)
from hermes.state.registry import Registry
from hermes.state.sessions import (
    NewSession,
    current_session,
    ensure_session,
    get_session,
    set_model,
)
from hermes.terminal.env import EnvPolicy
from hermes.terminal.placement import Backends
from hermes.terminal.session import TerminalSession, own_directory

log = logging.getLogger(__name__)

DRAIN_NOTICE = "hermes is shutting down; send your message again in a moment"
RESUMED_PREFIX = "(answered after hermes restarted) "
CUT_NOTICE = "hermes restarted while answering this; please send it again"
HOUSEKEEPING = 5.0  # seconds between looks for approvals to announce
TURN_STEPS = 16  # steps of a turn not yet passed on; the turn waits while it is full

TURN_OVERHEAD = Histogram(
    "hermes_turn_overhead_seconds",
    "What hermes adds to an answered turn: its arrival to its final step handed to the"
    " adapter, less the model's calls (request to last byte) and the tools' runs",
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1,
             0.25, 0.5, 1.0),
)  # fmt: skip
LOCAL_POLICY = PlatformConfig(allow_all_users=True, group_policy="open", require_mention=False)


@attrs.frozen
class SessionServices:
    """What a session's tools reach beyond state.db: handles of the serve tree's children,
    and what a command's environment may hold (`policy`: serve's secrets kept out)."""

    background: Address | None = None
    scheduler: Address | None = None
    tz: ZoneInfo = ZoneInfo("UTC")
    outbox: Address | None = None
    policy: EnvPolicy = EnvPolicy()
    backends: Backends = attrs.Factory(Backends.host_only)  # where commands run
    adapter_of: Callable[[str], Address | None] = lambda _platform: None
    speech: Speech = Speech()  # the media settings and the speech providers' keys


def _origin(event: InboundEvent) -> Origin:
    return Origin(event.platform, event.chat_id, event.thread_id, event.user_id, event.scope_id,
                  str(event.chat_type))  # fmt: skip


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


@attrs.define
class _Following:
    """A turn in flight, as the router follows it."""

    event: InboundEvent
    session_id: str
    resume: bool
    times: TurnTimes | None
    settle: Then  # closes its journal row: with its final message, else with the notice
    queued: bool = False  # its answer goes into the outbox with its final message
    in_terminal: set[str] = attrs.Factory(set)  # open terminal calls
    resumable: bool = True
    scope: trio.CancelScope = attrs.Factory(lambda: trio.CancelScope(shield=True))


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
        self.workdir = config.agent.workdir_path()  # else each session's own, in workspace
        self.memory = MemoryStore(memories)  # the owner-wide files
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
        self.sessions: dict[str, tuple[SessionActor, Address]] = {}
        self.current: dict[str, str] = {}  # session key -> its session id
        self.following: dict[tuple[str, str], _Following] = {}  # by (platform, event id)
        self._hosting: dict[SessionActor, trio.Event] = {}  # set when an actor's run ends
        self._refusals_logged: set[tuple[str, str, str]] = set()
        self._followers_done = trio.Event()
        self._followers_done.set()
        self.db: Db | None = None
        self.draining = False
        self._drain_by = math.inf
        self._drain_asked = trio.Event()
        # Events to route, as admission told them (an event taken from the journal: unclaimed).
        self._arrived, self._arrivals = trio.open_memory_channel[Admitted](256)
        self._look = trio.Event()  # set: housekeeping looks now, not at its next round
        self._arrivals_idle = trio.Event()
        # Each platform's owners by pairing, as read since the last housekeeping round
        # (or PairingChanged): a turn asks its sender's role, and they rarely change.
        self._owners: dict[str, frozenset[str]] = {}

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
        # What waited for approval when serve stopped never runs: expired before resumes.
        self.approval_waits.reopen()
        for request in await self.db.write(expire_left, self._gone, now):
            log.info("approval %s expired: nobody waits for it any more", request.id)
        waiting = await self.db.read(admitted)
        resumed = await self.db.write(
            claim_interrupted, self.owner, now, self.gateway.resume_window
        )
        self.nursery.start_soon(self._take, waiting, resumed)
        self.nursery.start_soon(self._housekeeping)
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
            for follow in self.following.values():
                if follow.in_terminal:
                    follow.resumable = False
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
        for actor, _ in list(self.sessions.values()):
            await actor.idle.wait()
        await self._followers_done.wait()

    async def flush(self) -> None:
        """Cancel the turns still running (each records its interruption), then let go."""
        for actor, _ in list(self.sessions.values()):
            actor.request_drain(trio.current_time())
        try:
            for ended in list(self._hosting.values()):
                await ended.wait()
            await self._followers_done.wait()
        finally:
            for follow in list(self.following.values()):
                follow.scope.cancel()  # out of time: what was not sent is not sent

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Admitted):
            await self._arrived.send(msg)
            return None
        if isinstance(msg, Mirrored):
            for session_id in msg.session_ids:
                actor = self.session_actor(session_id)
                if actor is not None:
                    actor.reload()
            return None
        if isinstance(msg, PairingChanged):
            self._owners.clear()
            self._look.set()
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
        word = text.split(maxsplit=1)[0].split("@", 1)[0].lower() if text else ""
        if text.startswith("/"):  # an owner's shared conversation is not a user's to change
            session_id = await self._session_id(event)
            refusal = await refused_in_shared(self, event, session_id)
            if refusal is not None:
                await self._end(event, session_id, StepKind.DONE, refusal, ANSWERED)
                return
        if word in COMMANDS:
            session_id = await self._session_id(event)
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
        return await role_of(event, self.config, self._owners_of)

    async def owner_ids(self, platform: str) -> frozenset[str]:
        """Who may approve a command asked on `platform`, as user ids."""
        return await owner_ids(platform, self.config, self._owners_of)

    def ops(self, event: InboundEvent) -> Ops:
        """An operator action done from the chat by `event`'s sender."""
        name = f" ({event.user_name})" if event.user_name else ""
        by = f"{event.platform} {event.user_id}{name}"
        return Ops(self.db, self.clock, self.config, self.live, by)

    async def _owners_of(self, platform: str) -> frozenset[str]:
        if platform not in self._owners:
            self._owners[platform] = await self.db.read(owners, platform)
        return self._owners[platform]

    def detail(self) -> dict[str, Any]:
        return {"sessions": len(self.sessions)}

    def ready_handle(self) -> Intake:
        return Intake(self.address, self.owner)

    # -- sessions ---------------------------------------------------------------

    def key_of(self, event: InboundEvent) -> str:
        key = session_key(event.target(), event.chat_type, event.user_id, self.gateway)
        return key or f"agent:event:{event.platform}:{event.event_id}"  # nobody to key by

    async def _session_id(self, event: InboundEvent) -> str:
        """The session an event belongs to: the one its edge picked, else its key's live
        session, else a new one."""
        if event.session_hint and event.platform == "local":  # the token-gated edge only
            return event.session_hint
        key = self.key_of(event)
        session_id = self.current.get(key)
        if session_id is None:
            session_id = await self.db.read(current_session, key) or new_session_id(event.platform)
            self.current[key] = session_id
        return session_id

    async def start_new(self, event: InboundEvent) -> str:
        """/new: the key's next message starts a new session; returns its id. It is
        written at once, as the key's live session: state.db, not this router's
        memory, is where a restart or a brief's mirror finds it."""
        session_id = new_session_id(event.platform)
        if not (event.session_hint and event.platform == "local"):
            key = self.key_of(event)
            self.current[key] = session_id
            await self.db.write(ensure_session, NewSession(
                session_id, source=event.platform, session_key=key, chat_id=event.chat_id,
                chat_type=str(event.chat_type), thread_id=event.thread_id,
                user_id=event.user_id, user_name=event.user_name, scope_id=event.scope_id,
                started_at=self.clock.now(),
            ))  # fmt: skip
        return session_id

    def _turn_context(self, actor: SessionActor, event: InboundEvent, role: Role) -> ToolContext:
        """The session's context as the sender's: their role, their memory, their chat."""
        caller = Caller(event.platform, event.user_id, role)
        return attrs.evolve(
            actor.ctx, caller=caller, memory=memory_of(self.memory, caller), origin=_origin(event)
        )

    def session_actor(self, session_id: str) -> SessionActor | None:
        entry = self.sessions.get(session_id)
        return entry[0] if entry is not None and entry[0].state != "stopped" else None

    async def choose_model(self, event: InboundEvent, session_id: str, model: str | None) -> None:
        """/model: the session's provider from its next turn on (None: config's order),
        kept in state.db; its session actor (started if need be) is told."""
        await self._session(session_id, event)  # the session's row exists from here
        await self.db.write(set_model, session_id, model)
        actor = self.session_actor(session_id)
        if actor is not None:
            actor.ctx = attrs.evolve(actor.ctx, model=model)

    async def interrupt(self, session_id: str) -> bool:
        entry = self.sessions.get(session_id)
        if entry is None:
            return False
        try:
            return await entry[1].call(Interrupt())
        except ActorStopped:
            return False

    async def _session(self, session_id: str, event: InboundEvent) -> Address:
        entry = self.sessions.get(session_id)
        if entry is not None and entry[0].state != "stopped":
            return entry[1]
        row = await self.db.read(get_session, session_id)  # a read: no commit
        if row is None:
            await self.db.write(ensure_session, NewSession(
                session_id, source=event.platform, session_key=self.key_of(event),
                chat_id=event.chat_id, chat_type=str(event.chat_type), thread_id=event.thread_id,
                user_id=event.user_id, user_name=event.user_name, scope_id=event.scope_id,
                title=event.title, title_source="derived" if event.title else None,
                started_at=self.clock.now(),
            ))  # fmt: skip
        services = self.services
        home = HermesHome(self.home_root)
        own = await own_directory(home.workspace, session_id)
        workdir = self.workdir or own
        terminal = TerminalSession(workdir, own=own, state_dir=self.home_root / ".terminal",
                                   policy=services.policy, backends=services.backends)  # fmt: skip
        caller = Caller(event.platform, event.user_id, "user")  # each turn says whose it is
        ctx = ToolContext(
            session_id,
            self.db,
            terminal,
            memory_of(self.memory, caller),
            caller,
            background=services.background,
            scheduler=services.scheduler,
            origin=_origin(event),
            tz=services.tz,
            outbox=services.outbox,
            platforms=frozenset(self.policies),
            clock=self.clock,
            model=row.model if row is not None else None,
            approver=self.approvals,
            files=SessionFiles(
                home.root,
                workdir,
                self.workdir is None,
                home.cache,
                terminal.state_dir / "output",
                home.outgoing,
            ),  # fmt: skip
        )
        actor = SessionActor(ctx, self.agent, self.gateway.busy_mode, source=event.platform,
                             voice=VoiceReplies(services.speech, home.outgoing))  # fmt: skip
        address = await self.nursery.start(self._host, actor)
        self.sessions[session_id] = (actor, address)
        return address

    async def _host(self, actor: SessionActor, task_status: trio.TaskStatus[Address]) -> None:
        self._hosting[actor] = ended = trio.Event()
        try:
            await actor.run(task_status=task_status)
        except Exception:
            log.exception("session actor %s crashed", actor.name)
        finally:
            session_id = actor.ctx.session_id
            if self.sessions.get(session_id, (None,))[0] is actor:
                del self.sessions[session_id]
                # Forget its key too (state.db has it): what is kept stays bounded by the
                # live sessions over months of new chats.
                for key in [k for k, v in self.current.items() if v == session_id]:
                    del self.current[key]
            del self._hosting[actor]
            ended.set()

    # -- turns ------------------------------------------------------------------

    async def _turn(
        self, event: InboundEvent, text: str, resume: bool = False, arrived: float | None = None
    ) -> None:
        session_id = await self._session_id(event)
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
        follow = _Following(event, session_id, resume, times, settle, queued=answer is not None)
        self.following[event.platform, event.event_id] = follow
        if self._followers_done.is_set():  # one already waited on stays the one
            self._followers_done = trio.Event()
        self.nursery.start_soon(self._follow, follow, events)
        try:
            turn = Turn(text, send, resume=resume, answer=answer, settle=settle, times=times,
                        untrusted=untrusted)  # fmt: skip
            try:
                await self._hand(session_id, event, role, turn)
            except ActorStopped:  # it stopped for idleness a moment ago: start it again
                self.sessions.pop(session_id, None)
                await self._hand(session_id, event, role, turn)
        except BaseException:
            send.close()  # no turn will send its events
            raise

    async def _hand(self, session_id: str, event: InboundEvent, role: Role, turn: Turn) -> None:
        """The turn to its session's actor (started if need be), as the sender's."""
        address = await self._session(session_id, event)
        actor = self.sessions[session_id][0]
        ctx = self._turn_context(actor, event, role)
        await address.cast(attrs.evolve(turn, ctx=ctx, media=self.media.for_event(event)))

    async def _follow(
        self, follow: _Following, events: trio.MemoryReceiveChannel[TurnStep]
    ) -> None:
        """Pass a turn's steps on as they come, then answer and close its journal row.

        Shielded: when the router is cancelled at the drain deadline, its turns end
        with an interrupted step that must still reach the user. The turn's events
        end when its session actor does; `flush` cancels what is left after that.
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
                try:
                    await self._close(follow, final)
                except (ActorStopped, StateError) as exc:  # a hurried stop: state.db is gone
                    log.warning("the end of %s:%s is not recorded: %s", event.platform,
                                event.event_id, exc)  # fmt: skip
        finally:
            del self.following[event.platform, event.event_id]
            if not self.following:
                self._followers_done.set()

    async def _close(self, follow: _Following, final: TurnStep | None) -> None:
        event = follow.event
        target, key = event.target(), f"{event.platform}:{event.event_id}"
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
        await self.replies.answer(event, target, text or "", key, then=then)  # one commit

    # -- housekeeping -------------------------------------------------------------

    async def _housekeeping(self) -> None:
        """Tell users an operator approved that they are in: at once when the approval
        came through serve (PairingChanged), else at the next round (an approval made
        in state.db with no serve running, or by another serve on the home)."""
        while True:
            self._look = trio.Event()
            self._owners.clear()  # an approval or revocation made outside serve shows now
            # An event admitted while this router was starting (or restarting) had no
            # one to tell: take it from the journal (a claim is atomic: never twice).
            for event in await self.db.read(admitted, self.clock.now() - HOUSEKEEPING):
                await self._arrived.send(Admitted(event))
            for welcome in await self.db.read(to_welcome):
                if welcome.platform not in self.policies:
                    continue
                owner = welcome.user_id in await self.owner_ids(welcome.platform)  # as it is now
                welcome = attrs.evolve(welcome, owner=owner)
                target = Target(welcome.platform, welcome.chat_id)
                await self.replies.answer(None, target, welcome.message(), welcome.key)
                await self.db.write(welcomed, welcome.platform, welcome.user_id, self.clock.now())
            self.limit.forget_idle()
            with trio.move_on_after(HOUSEKEEPING):
                await self._look.wait()
