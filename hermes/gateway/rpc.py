"""The local endpoint's methods: chat with streamed turn events, sessions, cron, status."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import trio

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.actors.supervisor import Supervisor
from hermes.adapters.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_BUSY, RpcError
from hermes.adapters.local_ws import Client
from hermes.cron.injection import InjectionRefused
from hermes.cron.jobs import Origin
from hermes.cron.schedule import ScheduleError, parse_schedule
from hermes.cron.scheduler import CancelFire, JobsChanged, RunNow
from hermes.cron.store import JobError, NewJob, cancel_job, create_job, list_jobs
from hermes.gateway.gateway import Chat, Draining
from hermes.state.db import Db
from hermes.state.errors import SearchQueryError, StateError
from hermes.state.messages import messages_of
from hermes.state.registry import Registry
from hermes.state.search import search_messages
from hermes.state.sessions import get_session, list_sessions


def _need(params: dict[str, Any], key: str, kind: type = str) -> Any:
    value = params.get(key)
    if not isinstance(value, kind) or value in ("", None):
        raise RpcError(INVALID_PARAMS, f"param {key!r} must be a non-empty {kind.__name__}")
    return value


class Methods:
    """Bound to the serve tree. The endpoint holds them open (`async with`: their
    state.db handle); the scheduler and gateway start after the endpoint and may
    restart without it, so their addresses are looked up at call time."""

    def __init__(self, root: Supervisor, registry: Registry, state_db: Path, tz: ZoneInfo) -> None:
        self.root = root
        self.tz = tz
        self._db = Db(registry, state_db)
        self._exits = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Methods:
        await self._exits.enter_async_context(self._db)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exits.aclose()

    def _address(self, name: str) -> Address:
        return self.root.handle_of(name, Address)

    async def db(self) -> Db:
        return self._db

    async def __call__(self, client: Client, method: str, params: dict[str, Any]) -> Any:
        handler: Callable | None = getattr(self, "m_" + method.replace(".", "_"), None)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"no method {method!r}")
        try:
            return await handler(client, params)
        except (Draining, ActorStopped) as exc:
            raise RpcError(SERVER_BUSY, str(exc)) from None
        except (JobError, ScheduleError, InjectionRefused, SearchQueryError) as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        except StateError as exc:
            raise RpcError(SERVER_BUSY, str(exc)) from None

    async def m_chat_send(self, client: Client, params: dict[str, Any]) -> Any:
        text = _need(params, "text")
        session = params.get("session")
        send, events = trio.open_memory_channel[dict[str, Any]](math.inf)  # the turn's events
        with events:
            # Submitted, not awaited: the gateway answers (the session id) before the
            # turn's first event exists, so waiting on the events waits for both.
            try:
                answer = await self._address("gateway").submit(Chat(session, text, send))
            except BaseException:
                send.close()
                raise
            try:
                first = await _next_event(events)
                reply = await answer.wait()
            finally:
                answer.abandon()
            if isinstance(reply, dict):  # /new or /stop
                return reply
            session_id = reply
            client.sessions.add(session_id)
            return await self._stream(client, session_id, first, events)

    async def _stream(
        self,
        client: Client,
        session_id: str,
        event: dict[str, Any] | None,
        events: trio.MemoryReceiveChannel[dict[str, Any]],
    ) -> dict[str, Any]:
        """Send the turn's events to the client as they come; the turn's outcome."""
        final, status = "", "done"
        while event is not None:
            await client.notify("turn.event", {"session": session_id, **event})
            if event["kind"] == "done":
                final = event["text"]
            elif event["kind"] in ("interrupted", "error"):
                status, final = event["kind"], event["text"]
            event = await _next_event(events)
        return {"session": session_id, "text": final, "status": status}

    async def m_sessions_list(self, client: Client, params: dict[str, Any]) -> Any:
        db = await self.db()
        rows = await db.read(list_sessions, int(params.get("limit", 20)), params.get("source"))
        return [r.to_dict() for r in rows]

    async def m_sessions_show(self, client: Client, params: dict[str, Any]) -> Any:
        db = await self.db()
        session = await db.read(get_session, _need(params, "id"))
        if session is None:
            raise RpcError(INVALID_PARAMS, f"no session {params['id']!r}")
        messages = await db.read(messages_of, session.id)
        return {"session": session.to_dict(), "messages": [m.to_dict() for m in messages]}

    async def m_sessions_search(self, client: Client, params: dict[str, Any]) -> Any:
        hits = await (await self.db()).read(search_messages, _need(params, "query"))
        return [{"session": h.session_id, "role": h.role, "snippet": h.snippet} for h in hits]

    async def m_cron_list(self, client: Client, params: dict[str, Any]) -> Any:
        jobs = await (await self.db()).read(list_jobs, bool(params.get("all")))
        return [j.to_dict() for j in jobs]

    async def m_cron_add(self, client: Client, params: dict[str, Any]) -> Any:
        prompt = _need(params, "prompt")
        now = time.time()
        schedule = parse_schedule(_need(params, "schedule"), self.tz, now)
        session = params.get("session")
        origin = Origin("local", session) if session else None
        new = NewJob(params.get("name") or prompt[:40], schedule, prompt=prompt,
                     deliver=params.get("deliver") or ("origin" if origin else "local"),
                     origin=origin)  # fmt: skip
        job = await (await self.db()).write(create_job, new, now, self.tz)
        if session:
            client.sessions.add(session)
        await self._address("scheduler").cast(JobsChanged())
        return job.to_dict()

    async def m_cron_run(self, client: Client, params: dict[str, Any]) -> Any:
        job_id, fence = await self._address("scheduler").call(
            RunNow(_need(params, "job"), params.get("prompt"))
        )
        return {"job": job_id, "run": fence}

    async def m_cron_cancel(self, client: Client, params: dict[str, Any]) -> Any:
        ref = _need(params, "job")
        cancelled = await self._address("scheduler").call(CancelFire(ref, params.get("run")))
        if not cancelled:
            await (await self.db()).write(cancel_job, ref, time.time())
        return {"cancelled": cancelled or [ref]}

    async def m_status(self, client: Client, params: dict[str, Any]) -> Any:
        return self.root.snapshot().to_dict()


async def _next_event(events: trio.MemoryReceiveChannel[dict[str, Any]]) -> dict[str, Any] | None:
    """The turn's next event, None at its end; one already waiting is taken
    without a schedule point (the text and done of a quick turn arrive together)."""
    try:
        return events.receive_nowait()
    except trio.WouldBlock:
        pass
    except trio.EndOfChannel:
        return None
    try:
        return await events.receive()
    except trio.EndOfChannel:
        return None
