"""The conversations' session actors: which session an event belongs to (the session its
chat is attached to by /continue, or with `gateway.follow: last` its person's latest,
else its key's live session, kept in state.db), starting an actor on demand in the
router's nursery with the session's tools, finding it, interrupting it, and forgetting it
when it stops."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import apsw
import attrs
import trio

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import InboundEvent
from hermes.adapters.settings import Busy, GatewayConfig
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore, memory_of
from hermes.agent.permissions import Caller
from hermes.agent.speech import Speech
from hermes.agent.tools.base import Approver, Asker, SessionFiles, ToolContext
from hermes.config import Role
from hermes.delivery.session_keys import Keying, new_session_id, session_key, shared
from hermes.delivery.targets import Origin
from hermes.gateway.session_actor import Interrupt, SessionActor
from hermes.gateway.voice_replies import VoiceReplies
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.identities import accounts_of, attached_for, detach, latest_session
from hermes.state.sessions import (
    NewSession,
    current_session,
    ensure_session,
    get_session,
    set_busy,
    set_model,
)
from hermes.terminal.env import EnvPolicy
from hermes.terminal.placement import Backends
from hermes.terminal.session import TerminalSession, own_directory

log = logging.getLogger(__name__)


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


def origin_of(event: InboundEvent) -> Origin:
    return Origin(
        event.platform,
        event.chat_id,
        event.thread_id,
        event.user_id,
        event.scope_id,
        str(event.chat_type),
        event.answer_to,
    )


class SessionHost:
    """The live session actors, by session id, hosted in `nursery` (the router's)."""

    def __init__(
        self,
        nursery: trio.Nursery,
        db: Db,
        home_root: Path,
        memory: MemoryStore,
        agent: Agent,
        gateway: GatewayConfig,
        workdir: Path | None,
        clock: Clock,
        services: SessionServices,
        approvals: Approver | None,
        platforms: frozenset[str],
        keying: Keying,
        asker: Asker | None = None,
    ) -> None:
        """`workdir`: agent.workdir (None: each session's own directory); `platforms`:
        where a session's send_message may send."""
        self.nursery = nursery
        self.db = db
        self.home_root = home_root
        self.memory = memory
        self.agent = agent
        self.gateway = gateway
        self.workdir = workdir
        self.clock = clock
        self.services = services
        self.approvals = approvals
        self.platforms = platforms
        self.keying = keying
        self.asker = asker  # asks a turn's user (clarify)
        self.sessions: dict[str, tuple[SessionActor, Address]] = {}
        self.current: dict[str, str] = {}  # session key -> its session id
        self.hosting: dict[SessionActor, trio.Event] = {}  # set when an actor's run ends

    def key_of(self, event: InboundEvent) -> str:
        key = session_key(event.target(), event.chat_type, event.user_id, self.keying)
        return key or f"agent:event:{event.platform}:{event.event_id}"  # nobody to key by

    async def session_id(self, event: InboundEvent, person: str | None = None) -> str:
        """The session an event belongs to: the one its edge picked; with `gateway.follow:
        last`, its `person`'s latest; else the one its chat is attached to, else its key's
        live session, else a new one."""
        if event.session_hint and event.platform == "local":  # the token-gated edge only
            return event.session_hint
        key = self.key_of(event)
        if person is not None and not self.shared(event):  # read each time: links change
            linked = await self.db.read(self._linked, key, person)
            if linked is not None:
                return linked
        session_id = self.current.get(key)
        if session_id is None:
            found = await self.db.read(current_session, key)
            session_id = self.current[key] = found or new_session_id(event.platform)
        return session_id

    def _linked(self, conn: apsw.Connection, key: str, person: str) -> str | None:
        """A linked person's session for `key`: their latest (`gateway.follow: last`),
        else the one the chat is attached to while it is one of theirs (/continue)."""
        if self.gateway.follow == "last":
            return latest_session(conn, accounts_of(conn, person))
        return attached_for(conn, key, person)

    def shared(self, event: InboundEvent) -> bool:
        """Whether `event`'s conversation is its chat's, everyone's in it."""
        return shared(event.target(), event.chat_type, self.keying)

    def _new_row(
        self, session_id: str, event: InboundEvent, key: str, *, titled: bool = False
    ) -> NewSession:
        """The row of a session `event` starts under `key` (`titled`: named by the event's
        title, where it has one; a /new session is named by what comes next)."""
        title = event.title if titled else None
        return NewSession(
            session_id,
            source=event.platform,
            session_key=key,
            chat_id=event.chat_id,
            chat_type=str(event.chat_type),
            thread_id=event.thread_id,
            user_id=event.user_id,
            user_name=event.user_name,
            scope_id=event.scope_id,
            title=title,
            title_source="derived" if title else None,
            started_at=self.clock.now(),
        )

    async def start_new(self, event: InboundEvent) -> str:
        """/new: the key's next message starts a new session; returns its id. It is
        written at once, as the key's live session: state.db, not this router's
        memory, is where a restart or a brief's mirror finds it."""
        session_id = new_session_id(event.platform)
        if not (event.session_hint and event.platform == "local"):
            key = self.key_of(event)
            self.current[key] = session_id
            await self.db.write(detach, key)  # a chat /continue attached goes back to its own
            await self.db.write(ensure_session, self._new_row(session_id, event, key))
        return session_id

    def turn_context(
        self, actor: SessionActor, event: InboundEvent, role: Role, person: str | None = None
    ) -> ToolContext:
        """The session's context as the sender's: their role, their memory (their person's,
        where linked), their chat."""
        caller = Caller(event.platform, event.user_id, role, person)
        return attrs.evolve(
            actor.ctx, caller=caller, memory=memory_of(self.memory, caller), origin=origin_of(event)
        )

    def session_actor(self, session_id: str) -> SessionActor | None:
        entry = self.sessions.get(session_id)
        return entry[0] if entry is not None and entry[0].state != "stopped" else None

    async def choose_model(self, event: InboundEvent, session_id: str, model: str | None) -> None:
        """/model: the session's provider from its next turn on (None: config's order),
        kept in state.db; its session actor (started if need be) is told."""
        await self.address(session_id, event)  # the session's row exists from here
        await self.db.write(set_model, session_id, model)
        actor = self.session_actor(session_id)
        if actor is not None:
            actor.ctx = attrs.evolve(actor.ctx, model=model)

    async def choose_busy(self, event: InboundEvent, session_id: str, busy: Busy | None) -> None:
        """/busy: what a message mid-turn does in this session (None: config's), kept in
        state.db; its session actor (started if need be) is told."""
        await self.address(session_id, event)  # the session's row exists from here
        await self.db.write(set_busy, session_id, busy)
        actor = self.session_actor(session_id)
        if actor is not None:
            actor.busy = busy

    async def interrupt(self, session_id: str) -> bool:
        entry = self.sessions.get(session_id)
        if entry is None:
            return False
        try:
            return await entry[1].call(Interrupt())
        except ActorStopped:
            return False

    async def address(self, session_id: str, event: InboundEvent) -> Address:
        """The session actor of `session_id` (started, and its row made, if need be)."""
        entry = self.sessions.get(session_id)
        if entry is not None and entry[0].state != "stopped":
            return entry[1]
        row = await self.db.read(get_session, session_id)  # a read: no commit
        if row is None:
            fresh = self._new_row(session_id, event, self.key_of(event), titled=True)
            await self.db.write(ensure_session, fresh)
        services = self.services
        home = HermesHome(self.home_root)
        own = await own_directory(home.workspace, session_id)
        workdir = self.workdir or own
        terminal = TerminalSession(
            workdir,
            own=own,
            state_dir=self.home_root / ".terminal",
            policy=services.policy,
            backends=services.backends,
        )
        caller = Caller(event.platform, event.user_id, "user")  # each turn says whose it is
        ctx = ToolContext(
            session_id,
            self.db,
            terminal,
            memory_of(self.memory, caller),
            caller,
            background=services.background,
            scheduler=services.scheduler,
            origin=origin_of(event),
            tz=services.tz,
            outbox=services.outbox,
            platforms=self.platforms,
            clock=self.clock,
            model=row.model if row is not None else None,
            approver=self.approvals,
            asker=self.asker,
            files=SessionFiles(
                home.root,
                workdir,
                self.workdir is None,
                home.cache,
                terminal.state_dir / "output",
                home.outgoing,
            ),
        )
        actor = SessionActor(
            ctx,
            self.agent,
            source=event.platform,
            voice=VoiceReplies(services.speech, home.outgoing),
        )
        actor.busy = row.busy if row is not None else None
        address = await self.nursery.start(self._host, actor)
        self.sessions[session_id] = (actor, address)
        return address

    async def _host(self, actor: SessionActor, task_status: trio.TaskStatus[Address]) -> None:
        self.hosting[actor] = ended = trio.Event()
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
            del self.hosting[actor]
            ended.set()
