"""Sessions: list, show (a transcript), search, export."""

from __future__ import annotations

from typing import Literal

import attrs

from hermes.actors.errors import NotFound
from hermes.config import not_blank
from hermes.operations.context import Operation, Ops, count
from hermes.state.export import to_json, to_markdown
from hermes.state.messages import messages_of
from hermes.state.rows import MessageRow, SessionRow
from hermes.state.search import search_messages
from hermes.state.sessions import child_sessions, get_session, list_sessions

MAX_LIMIT = 1000
TRANSCRIPT_LIMIT = 1000  # messages `show` returns; an export has them all


@attrs.frozen
class ListArgs:
    limit: int = attrs.field(default=20, validator=count(1, MAX_LIMIT))
    source: str | None = None  # only this platform (local, telegram, cron, ...)


@attrs.frozen
class ShowArgs:
    id: str = attrs.field(validator=not_blank)


@attrs.frozen
class SearchArgs:
    query: str = attrs.field(validator=not_blank)
    limit: int = attrs.field(default=20, validator=count(1, MAX_LIMIT))
    tools: bool = False  # tool output too


@attrs.frozen
class ExportArgs:
    id: str = attrs.field(validator=not_blank)
    format: Literal["json", "md"] = "json"


@attrs.frozen
class Transcript:
    session: SessionRow
    messages: list[MessageRow]
    children: list[SessionRow] = attrs.Factory(list)  # its subagents' sessions


@attrs.frozen
class Hit:
    session: str
    message: int
    role: str
    timestamp: float
    snippet: str


@attrs.frozen
class Exported:
    format: str
    text: str


async def list_session_rows(ops: Ops, args: ListArgs) -> list[SessionRow]:
    return await ops.db.read(list_sessions, args.limit, args.source)


async def _transcript(ops: Ops, session_id: str, limit: int | None) -> Transcript:
    def read(conn) -> Transcript:
        session = get_session(conn, session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}")
        return Transcript(
            session, messages_of(conn, session_id, limit), child_sessions(conn, session_id)
        )

    return await ops.db.read(read)


async def show_session(ops: Ops, args: ShowArgs) -> Transcript:
    return await _transcript(ops, args.id, TRANSCRIPT_LIMIT)


async def search_sessions(ops: Ops, args: SearchArgs) -> list[Hit]:
    hits = await ops.db.read(search_messages, args.query, args.limit, args.tools)
    return [Hit(h.session_id, h.message_id, h.role, h.timestamp, h.snippet) for h in hits]


async def export_session(ops: Ops, args: ExportArgs) -> Exported:
    found = await _transcript(ops, args.id, None)
    render = to_json if args.format == "json" else to_markdown
    return Exported(args.format, render(found.session, found.messages))


OPERATIONS = (
    Operation("sessions.list", ListArgs, list[SessionRow], list_session_rows),
    Operation("sessions.show", ShowArgs, Transcript, show_session),
    Operation("sessions.search", SearchArgs, list[Hit], search_sessions),
    Operation("sessions.export", ExportArgs, Exported, export_session),
)
