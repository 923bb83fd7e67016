"""The gateway actor: routes chat messages to one session actor per live key.

Session actors are started on demand in the gateway's nursery and stop when
idle. While draining, new messages get a drain notice; turns in flight get
until the drain deadline, then are cancelled (the loop records that).
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.agent.loop import Agent
from hermes.agent.memory import MemoryStore
from hermes.agent.tools.base import ToolContext
from hermes.config import GatewayConfig
from hermes.cron.delivery import Deliverer, NoAdapters
from hermes.cron.jobs import Origin
from hermes.gateway.session_actor import Interrupt, SessionActor, Turn
from hermes.state.db import Db
from hermes.state.errors import SessionNotFound
from hermes.state.registry import Registry
from hermes.state.sessions import end_session
from hermes.terminal.session import TerminalSession

log = logging.getLogger(__name__)

DRAIN_NOTICE = "hermes is shutting down; send your message again in a moment"


class Draining(Exception):
    """The gateway takes no new turns while it drains."""


@attrs.frozen
class SessionServices:
    """What a session's tools reach beyond state.db: handles of the serve tree's children."""

    background: Address | None = None
    scheduler: Address | None = None
    deliverer: Deliverer = attrs.field(factory=NoAdapters)
    tz: ZoneInfo = ZoneInfo("UTC")


@attrs.frozen
class Chat:
    """Start a turn whose events go to `events` (closed when it ends); replies the
    session id. A command (/new, /stop) replies its result, and a refusal
    (draining) raises, with `events` closed at once."""

    session_id: str | None
    text: str
    events: trio.MemorySendChannel[dict[str, Any]]


class Gateway(Actor):
    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        home_root: Path,
        memories: Path,
        agent: Agent,
        config: GatewayConfig,
        services: SessionServices | None = None,
        name: str = "gateway",
    ) -> None:
        super().__init__(name)
        self.registry = registry
        self.state_db = state_db
        self.home_root = home_root
        self.memory = MemoryStore(memories)
        self.agent = agent
        self.config = config
        self.services = services or SessionServices()
        self.sessions: dict[str, tuple[SessionActor, Address]] = {}
        self._hosting: dict[SessionActor, trio.Event] = {}  # set when an actor's run ends
        self.db: Db | None = None
        self.draining = False

    async def on_start(self) -> None:
        self.db = await self.exits.enter_async_context(Db(self.registry, self.state_db))

    def stop_intake(self) -> None:
        self.draining = True  # messages still arrive, and get the drain notice

    async def finish_in_flight(self) -> None:
        for actor, _ in list(self.sessions.values()):
            await actor.idle.wait()

    async def flush(self) -> None:
        """Cancel the turns still running (each records its interruption), then let go."""
        for actor, _ in list(self.sessions.values()):
            actor.request_drain(trio.current_time())
        for ended in list(self._hosting.values()):
            await ended.wait()

    async def handle(self, msg: Any) -> Any:
        if isinstance(msg, Chat):
            try:
                return await self._chat(msg)
            except BaseException:
                msg.events.close()  # no turn will send them: the caller stops waiting
                raise
        raise TypeError(f"the gateway cannot handle {type(msg).__name__}")

    async def _chat(self, msg: Chat) -> Any:
        if self.draining:
            raise Draining(DRAIN_NOTICE)
        session_id = msg.session_id or f"local_{secrets.token_hex(6)}"
        text = msg.text.strip()
        if text in ("/new", "/stop"):
            msg.events.close()
            return await (self._new(session_id) if text == "/new" else self._stop(session_id))
        address = await self._session(session_id)
        # A cast: the turn's events go straight to the caller.
        try:
            await address.cast(Turn(msg.text, msg.events))
        except ActorStopped:  # it stopped for idleness a moment ago: start it again
            self.sessions.pop(session_id, None)
            address = await self._session(session_id)
            await address.cast(Turn(msg.text, msg.events))
        return session_id

    async def _session(self, session_id: str) -> Address:
        entry = self.sessions.get(session_id)
        if entry is not None and entry[0].state != "stopped":
            return entry[1]
        services = self.services
        ctx = ToolContext(
            session_id,
            self.db,
            TerminalSession(self.home_root, state_dir=self.home_root / ".terminal"),
            self.memory,
            background=services.background,
            scheduler=services.scheduler,
            origin=Origin("local", session_id),
            deliverer=services.deliverer,
            tz=services.tz,
        )
        actor = SessionActor(ctx, self.agent, self.config.busy_mode)
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
            if self.sessions.get(actor.ctx.session_id, (None,))[0] is actor:
                del self.sessions[actor.ctx.session_id]
            del self._hosting[actor]
            ended.set()

    async def _stop(self, session_id: str) -> dict[str, Any]:
        entry = self.sessions.get(session_id)
        stopped = await entry[1].call(Interrupt()) if entry else False
        return {"session": session_id, "stopped": stopped}

    async def _new(self, session_id: str) -> dict[str, Any]:
        await self._stop(session_id)
        try:
            await self.db.write(end_session, session_id, "new session")
        except SessionNotFound:
            pass  # it never had a turn
        return {"session": f"local_{secrets.token_hex(6)}", "previous": session_id}
