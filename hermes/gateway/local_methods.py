"""The local endpoint's methods other than chat: sessions, cron, status.

Plain functions of the layers below and the scheduler's address; chat itself
goes through the endpoint's admission like any platform's message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.snapshot import RunState
from hermes.actors.supervisor import Supervisor
from hermes.adapters.local.endpoint import Client
from hermes.adapters.local.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_BUSY, RpcError
from hermes.config import InputError, not_blank, structure
from hermes.cron.injection import InjectionRefused
from hermes.cron.schedule import ScheduleError, parse_schedule
from hermes.cron.scheduler import CancelFire, JobsChanged, RunNow
from hermes.cron.store import JobError, NewJob, cancel_job, create_job, list_jobs
from hermes.delivery.targets import Origin
from hermes.gateway.router import DRAIN_NOTICE
from hermes.state.db import UsesDb
from hermes.state.errors import SearchQueryError, StateError
from hermes.state.messages import messages_of
from hermes.state.registry import Registry
from hermes.state.search import search_messages
from hermes.state.sessions import get_session, list_sessions

# -- each method's parameters, declared once and checked in one place ------------------


def _limit(_inst: Any, attr: attrs.Attribute, value: int) -> None:
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"{attr.name}: must be between 1 and {MAX_LIMIT}, got {value}")


MAX_LIMIT = 1000


@attrs.frozen
class SessionsList:
    limit: int = attrs.field(default=20, validator=_limit)
    source: str | None = None


@attrs.frozen
class SessionsShow:
    id: str = attrs.field(validator=not_blank)


@attrs.frozen
class SessionsSearch:
    query: str = attrs.field(validator=not_blank)
    limit: int = attrs.field(default=20, validator=_limit)


@attrs.frozen
class CronList:
    all: bool = False


@attrs.frozen
class CronAdd:
    schedule: str = attrs.field(validator=not_blank)
    prompt: str = attrs.field(validator=not_blank)
    name: str | None = None
    deliver: str | None = None
    session: str | None = attrs.field(default=None, validator=not_blank)


@attrs.frozen
class CronRun:
    job: str = attrs.field(validator=not_blank)
    prompt: str | None = None


@attrs.frozen
class CronCancel:
    job: str = attrs.field(validator=not_blank)
    run: int | None = None


@attrs.frozen
class NoParams:
    pass


PARAMS: dict[str, type] = {
    "sessions.list": SessionsList,
    "sessions.show": SessionsShow,
    "sessions.search": SessionsSearch,
    "cron.list": CronList,
    "cron.add": CronAdd,
    "cron.run": CronRun,
    "cron.cancel": CronCancel,
    "status": NoParams,
}


class Methods(UsesDb):
    """Bound to the serve tree. The endpoint holds them open (`async with`: their
    state.db handle); the scheduler starts after the endpoint and may restart
    without it, so its address is looked up at call time."""

    def __init__(self, root: Supervisor, registry: Registry, state_db: Path, tz: ZoneInfo) -> None:
        self.root = root
        self.tz = tz
        super().__init__(registry, state_db)

    def _address(self, name: str) -> Address:
        return self.root.handle_of(name, Address)

    async def __call__(self, client: Client, method: str, params: dict[str, Any]) -> Any:
        kind = PARAMS.get(method)
        if kind is None:
            raise RpcError(METHOD_NOT_FOUND, f"no method {method!r}")
        try:
            args = structure(params, kind)
        except InputError as exc:
            raise RpcError(INVALID_PARAMS, f"invalid params of {method}: {exc}") from None
        handler: Callable = getattr(self, "m_" + method.replace(".", "_"))
        try:
            return await handler(client, args)
        except ActorStopped as exc:  # the gateway stops first in a drain; else it restarts
            why = DRAIN_NOTICE if self.root.state is RunState.DRAINING else str(exc)
            raise RpcError(SERVER_BUSY, why) from None
        except (JobError, ScheduleError, InjectionRefused, SearchQueryError) as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        except StateError as exc:
            raise RpcError(SERVER_BUSY, str(exc)) from None

    async def m_sessions_list(self, client: Client, params: SessionsList) -> Any:
        db = self.db
        rows = await db.read(list_sessions, params.limit, params.source)
        return [r.to_dict() for r in rows]

    async def m_sessions_show(self, client: Client, params: SessionsShow) -> Any:
        db = self.db
        session = await db.read(get_session, params.id)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"no session {params.id!r}")
        messages = await db.read(messages_of, session.id)
        return {"session": session.to_dict(), "messages": [m.to_dict() for m in messages]}

    async def m_sessions_search(self, client: Client, params: SessionsSearch) -> Any:
        hits = await self.db.read(search_messages, params.query, params.limit)
        return [{"session": h.session_id, "role": h.role, "snippet": h.snippet} for h in hits]

    async def m_cron_list(self, client: Client, params: CronList) -> Any:
        jobs = await self.db.read(list_jobs, params.all)
        return [j.to_dict() for j in jobs]

    async def m_cron_add(self, client: Client, params: CronAdd) -> Any:
        prompt, session = params.prompt, params.session
        now = time.time()
        schedule = parse_schedule(params.schedule, self.tz, now)
        origin = Origin("local", session, chat_type="dm") if session else None
        new = NewJob(params.name or prompt[:40], schedule, prompt=prompt,
                     deliver=params.deliver or ("origin" if origin else "local"),
                     origin=origin)  # fmt: skip
        job = await self.db.write(create_job, new, now, self.tz)
        if session:
            client.sessions.add(session)
        await self._address("scheduler").cast(JobsChanged())
        return job.to_dict()

    async def m_cron_run(self, client: Client, params: CronRun) -> Any:
        job_id, fence = await self._address("scheduler").call(RunNow(params.job, params.prompt))
        return {"job": job_id, "run": fence}

    async def m_cron_cancel(self, client: Client, params: CronCancel) -> Any:
        ref = params.job
        cancelled = await self._address("scheduler").call(CancelFire(ref, params.run))
        if not cancelled:
            await self.db.write(cancel_job, ref, time.time())
        return {"cancelled": cancelled or [ref]}

    async def m_status(self, client: Client, params: NoParams) -> Any:
        return self.root.snapshot().to_dict()
