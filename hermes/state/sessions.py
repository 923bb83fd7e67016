"""Session operations. Each takes a connection: writes run in the DbWriter's batch
(`await db.write(create_session, ...)`), reads on a read connection (`db.read`)."""

from __future__ import annotations

import apsw
import attrs

from hermes.state.errors import SessionNotFound, StateError
from hermes.state.rows import SESSION_SELECT, SessionRow

# Routing columns: once set, `ensure_session` never overwrites them.
ROUTING = ("source", "session_key", "chat_id", "chat_type", "thread_id", "user_id", "scope_id")

TITLE_AUTHORITY = {"derived": 0, "llm": 1, "user": 2}


@attrs.frozen
class NewSession:
    id: str
    source: str = "local"
    session_key: str | None = None
    chat_id: str | None = None
    chat_type: str | None = None
    thread_id: str | None = None
    user_id: str | None = None
    user_name: str | None = None
    scope_id: str | None = None
    parent_session_id: str | None = None
    model: str | None = None
    title: str | None = None
    title_source: str | None = None  # a TITLE_AUTHORITY key, with `title`
    started_at: float = attrs.field(kw_only=True)  # the caller's clock: writes read none


def create_session(conn: apsw.Connection, new: NewSession) -> SessionRow:
    """Insert a new session; an existing id is a ConstraintError."""
    values = attrs.asdict(new)
    names = ", ".join(values)
    marks = ", ".join(f":{n}" for n in values)
    conn.execute(f"INSERT INTO sessions ({names}) VALUES ({marks})", values)
    return get_session(conn, new.id)


def ensure_session(conn: apsw.Connection, new: NewSession) -> SessionRow:
    """Create the session, or fill in only the columns it still lacks.

    A routing column that is already set is never overwritten: a late event
    with different routing cannot move a live conversation somewhere else.
    """
    values = attrs.asdict(new)
    names = ", ".join(values)
    marks = ", ".join(f":{n}" for n in values)
    fill = ", ".join(
        f"{n} = COALESCE(sessions.{n}, excluded.{n})"
        for n in (*ROUTING, "user_name", "parent_session_id", "model", "title", "title_source")
    )
    conn.execute(
        f"INSERT INTO sessions ({names}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {fill}",
        values,
    )
    return get_session(conn, new.id)


def set_model(conn: apsw.Connection, session_id: str, model: str | None) -> None:
    """The session's /model choice ("name/model"); None: the configured order again."""
    conn.execute("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))
    if not conn.changes():
        raise SessionNotFound(session_id)


def child_sessions(conn: apsw.Connection, session_id: str) -> list[SessionRow]:
    """The sessions of a session's subagents (delegate_task), oldest first."""
    rows = conn.execute(
        f"{SESSION_SELECT} WHERE parent_session_id = ? ORDER BY started_at, id", (session_id,)
    )
    return [SessionRow(*r) for r in rows]


def cut_children(conn: apsw.Connection, session_id: str, now: float) -> list[str]:
    """A restart cut a session's turn while its subagents worked: those not finished end
    (`cut by a restart`); returns their titles (their goals), oldest first."""
    open_ = [c for c in child_sessions(conn, session_id) if c.ended_at is None]
    for child in open_:
        end_session(conn, child.id, "cut by a restart", now)
    return [c.title or c.id for c in open_]


def set_busy(conn: apsw.Connection, session_id: str, busy: str | None) -> None:
    """The session's /busy choice (interrupt, queue, steer); None: config's again."""
    conn.execute("UPDATE sessions SET busy = ? WHERE id = ?", (busy, session_id))
    if not conn.changes():
        raise SessionNotFound(session_id)


def current_session(conn: apsw.Connection, session_key: str) -> str | None:
    """The live session of a key (the newest not ended), if it has one."""
    row = conn.execute(
        "SELECT id FROM sessions WHERE session_key = ? AND ended_at IS NULL"
        " ORDER BY started_at DESC LIMIT 1",
        (session_key,),
    ).fetchone()
    return row[0] if row else None


def get_session(conn: apsw.Connection, session_id: str) -> SessionRow | None:
    row = conn.execute(f"{SESSION_SELECT} WHERE id = ?", (session_id,)).fetchone()
    return SessionRow(*row) if row else None


def require_session(conn: apsw.Connection, session_id: str) -> SessionRow:
    row = get_session(conn, session_id)
    if row is None:
        raise SessionNotFound(session_id)
    return row


def end_session(conn: apsw.Connection, session_id: str, reason: str, at: float) -> SessionRow:
    """Mark the session ended. The first reason wins; later calls change nothing."""
    conn.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        (at, reason, session_id),
    )
    return require_session(conn, session_id)


def set_title(conn: apsw.Connection, session_id: str, title: str, source: str) -> bool:
    """Set the title if `source` may: the user always; an automatic source
    (derived < llm) only when it raises the authority. Returns whether it changed."""
    if source not in TITLE_AUTHORITY:
        raise StateError(f"unknown title source {source!r}; one of {', '.join(TITLE_AUTHORITY)}")
    current = require_session(conn, session_id)
    have = TITLE_AUTHORITY.get(current.title_source or "", -1)
    want = TITLE_AUTHORITY[source]
    if source != "user" and want <= have:
        return False
    conn.execute(
        "UPDATE sessions SET title = ?, title_source = ? WHERE id = ?",
        (title, source, session_id),
    )
    return True


def list_sessions(
    conn: apsw.Connection, limit: int = 50, source: str | None = None
) -> list[SessionRow]:
    """Newest activity first."""
    where, args = ("WHERE source = ?", (source,)) if source else ("", ())
    rows = conn.execute(
        f"{SESSION_SELECT} {where} ORDER BY COALESCE(last_activity_at, started_at) DESC, id"
        " LIMIT ?",
        (*args, limit),
    )
    return [SessionRow(*r) for r in rows]


def chat_type_of(conn: apsw.Connection, source: str, chat_id: str) -> str | None:
    """What kind of chat (dm, group, channel) a platform's chat is, as its newest
    session recorded it; None for a chat hermes has not talked in."""
    row = conn.execute(
        "SELECT chat_type FROM sessions WHERE source = ? AND chat_id = ? AND chat_type IS NOT NULL"
        " ORDER BY started_at DESC LIMIT 1",
        (source, chat_id),
    ).fetchone()
    return row[0] if row else None
