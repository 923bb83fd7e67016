"""Message operations: append (one or a batch, in order), list, latest row id."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import apsw
import attrs

from hermes.state.errors import SessionNotFound
from hermes.state.rows import MESSAGE_SELECT, MessageRow


@attrs.frozen
class NewMessage:
    session_id: str
    role: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    timestamp: float | None = None
    token_count: int | None = None
    platform_message_id: str | None = None


def append_messages(conn: apsw.Connection, messages: Sequence[NewMessage]) -> list[int]:
    """Append in order; bumps each session's counters and activity. Returns the row ids."""
    ids = []
    now = time.time()
    for msg in messages:
        at = msg.timestamp if msg.timestamp is not None else now
        calls = json.dumps(msg.tool_calls) if msg.tool_calls else None
        conn.execute(
            "UPDATE sessions SET message_count = message_count + 1,"
            " tool_call_count = tool_call_count + ?, last_activity_at = ? WHERE id = ?",
            (len(msg.tool_calls or ()), at, msg.session_id),
        )
        if conn.changes() == 0:
            raise SessionNotFound(msg.session_id)
        conn.execute(
            "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id,"
            " tool_name, timestamp, token_count, platform_message_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                msg.session_id,
                msg.role,
                msg.content,
                calls,
                msg.tool_call_id,
                msg.tool_name,
                at,
                msg.token_count,
                msg.platform_message_id,
            ),
        )
        ids.append(conn.last_insert_rowid())
    return ids


def append_message(conn: apsw.Connection, message: NewMessage) -> int:
    return append_messages(conn, [message])[0]


def messages_of(
    conn: apsw.Connection, session_id: str, limit: int | None = None
) -> list[MessageRow]:
    """The session's messages in the order they were appended."""
    rows = conn.execute(
        f"{MESSAGE_SELECT} WHERE session_id = ? ORDER BY id LIMIT ?",
        (session_id, -1 if limit is None else limit),
    )
    return [MessageRow(*r) for r in rows]


def latest_message_row_id(
    conn: apsw.Connection, session_id: str, role: str | None = None
) -> int | None:
    """The newest message row id of the session, optionally of one role only."""
    if role is None:
        sql, args = "SELECT max(id) FROM messages WHERE session_id = ?", (session_id,)
    else:
        sql = "SELECT max(id) FROM messages WHERE session_id = ? AND role = ?"
        args = (session_id, role)
    return conn.execute(sql, args).get
