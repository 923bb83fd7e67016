"""Message operations: append (one or a batch, in order), list, latest row id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import apsw
import attrs

from hermes.state.errors import SessionNotFound
from hermes.state.rows import MESSAGE_SELECT, MessageRow
from hermes.state.sessions import NewSession, ensure_session


@attrs.frozen
class NewMessage:
    session_id: str
    role: str
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    timestamp: float = attrs.field(kw_only=True)  # the caller's clock: writes read none
    token_count: int | None = None
    platform_message_id: str | None = None
    input_tokens: int = 0  # what producing it cost, added to its session's counters
    output_tokens: int = 0
    untrusted: str | None = None  # why its text is not from an owner's hands (None: it is)
    attachments: str | None = None  # a user's files, as JSON


_COLUMNS = (
    "session_id, role, content, tool_calls, tool_call_id, tool_name, timestamp, token_count,"
    " platform_message_id, untrusted, attachments"
)
_BUMP_SESSION = (
    "UPDATE sessions SET message_count = message_count + 1,"
    " tool_call_count = tool_call_count + ?, last_activity_at = ?,"
    " input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?"
)
_INSERT_ROW = f"INSERT INTO messages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_BUMP_SESSIONS = (
    "UPDATE sessions SET message_count = message_count + d.value ->> 0,"
    " tool_call_count = tool_call_count + d.value ->> 1, last_activity_at = d.value ->> 2,"
    " input_tokens = input_tokens + d.value ->> 3, output_tokens = output_tokens + d.value ->> 4"
    " FROM json_each(?) AS d WHERE sessions.id = d.key"
)
_INSERT_ROWS = (
    f"INSERT INTO messages ({_COLUMNS}) SELECT value ->> 0, value ->> 1, value ->> 2,"
    " value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7, value ->> 8,"
    " value ->> 9, value ->> 10 FROM json_each(?) ORDER BY key"
)


def _row(msg: NewMessage) -> tuple[Any, ...]:
    at = msg.timestamp
    calls = json.dumps(msg.tool_calls) if msg.tool_calls else None
    return (
        msg.session_id,
        msg.role,
        msg.content,
        calls,
        msg.tool_call_id,
        msg.tool_name,
        at,
        msg.token_count,
        msg.platform_message_id,
        msg.untrusted,
        msg.attachments,
    )


def append_message(conn: apsw.Connection, message: NewMessage) -> int:
    """Append one message; bumps its session's counters, tokens and activity. Returns its
    row id. The writer runs appends queued together as one `append_messages`."""
    row = _row(message)
    bump = (len(message.tool_calls or ()), row[6], message.input_tokens, message.output_tokens)
    conn.execute(_BUMP_SESSION, (*bump, message.session_id))
    if conn.changes() == 0:
        raise SessionNotFound(message.session_id)
    conn.execute(_INSERT_ROW, row)
    return conn.last_insert_rowid()


def append_messages(conn: apsw.Connection, messages: Sequence[NewMessage]) -> list[int]:
    """Append in order, as `append_message` does each. Returns the row ids.

    Two statements however many messages there are: the rows travel as one
    JSON array. The writer's thread then crosses into SQLite twice per batch
    of appends instead of twice per message, and holds the GIL that much less.
    """
    if len(messages) <= 1:
        return [append_message(conn, m) for m in messages]
    rows = [_row(msg) for msg in messages]
    # session -> [messages, tool calls, last activity, input tokens, output tokens]
    bumps: dict[str, list[Any]] = {}
    for msg, row in zip(messages, rows, strict=True):
        bump = bumps.setdefault(msg.session_id, [0, 0, 0.0, 0, 0])
        bump[0] += 1
        bump[1] += len(msg.tool_calls or ())
        bump[2] = row[6]
        bump[3] += msg.input_tokens
        bump[4] += msg.output_tokens
    conn.execute(_BUMP_SESSIONS, (json.dumps(bumps),))
    if conn.changes() != len(bumps):
        ids = "SELECT id FROM sessions WHERE id IN (SELECT key FROM json_each(?))"
        known = {r[0] for r in conn.execute(ids, (json.dumps(bumps),))}
        raise SessionNotFound(next(s for s in bumps if s not in known))
    conn.execute(_INSERT_ROWS, (json.dumps(rows),))
    last = conn.last_insert_rowid()  # one statement's new rows have consecutive ids
    return list(range(last - len(rows) + 1, last + 1))


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


def untrusted_in(conn: apsw.Connection, session_id: str) -> str | None:
    """Why the session holds text from outside an owner's hands (its first such message's
    mark); None when it holds none."""
    return conn.execute(
        "SELECT untrusted FROM messages WHERE session_id = ? AND untrusted IS NOT NULL"
        " ORDER BY id LIMIT 1",
        (session_id,),
    ).get


@attrs.frozen
class Compaction:
    """Messages first..last of a session, as the prompt sees them from now on: a
    summary, or (kind 'dropped') a note that they were left out."""

    session_id: str
    first_message_id: int
    last_message_id: int
    kind: str
    summary: str
    model: str | None = None
    untrusted: str | None = None  # the summary was written from untrusted text: why


def add_compaction(conn: apsw.Connection, record: Compaction, at: float) -> int:
    conn.execute(
        "INSERT INTO compactions (session_id, first_message_id, last_message_id, kind, summary,"
        " model, untrusted, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (*attrs.astuple(record), at),
    )
    return conn.last_insert_rowid()


def latest_compaction(conn: apsw.Connection, session_id: str) -> Compaction | None:
    row = conn.execute(
        "SELECT session_id, first_message_id, last_message_id, kind, summary, model, untrusted"
        " FROM compactions WHERE session_id = ? ORDER BY id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return Compaction(*row) if row else None


@attrs.frozen
class PromptHistory:
    """What the next prompt of a session stands on: the latest compaction, and the
    messages after the range it covers (never the whole transcript of a long session)."""

    compaction: Compaction | None
    rows: list[MessageRow]


def prompt_history(conn: apsw.Connection, session_id: str) -> PromptHistory:
    compaction = latest_compaction(conn, session_id)
    after = compaction.last_message_id if compaction else 0
    rows = conn.execute(
        f"{MESSAGE_SELECT} WHERE session_id = ? AND id > ? AND undone_at IS NULL ORDER BY id",
        (session_id, after),
    )
    return PromptHistory(compaction, [MessageRow(*r) for r in rows])


# The user-role row that carries the images a tool showed (a page's screenshot) to the
# model: the agent's, not the user's words, so /undo and /retry pass over it.
SHOWN = "[the image a tool showed you]"
SHOWN_WHY = "an image a tool showed (a page's screenshot)"


@attrs.frozen
class Undone:
    """The user message /undo took out: its text, why it was untrusted, its files (JSON),
    so /retry asks it again as it was."""

    text: str
    untrusted: str | None
    attachments: str | None


def undo_last(conn: apsw.Connection, session_id: str, now: float) -> Undone | None:
    """/undo: the session's last exchange (its last user message not undone, and all
    after it) leaves the conversation the model sees; the transcript keeps it, marked
    `undone_at`. Only what the latest compaction has not covered can be undone. A tool's
    images (SHOWN) are not a user message: the exchange they are part of goes whole.
    Returns that user message (None: nothing to undo)."""
    compaction = latest_compaction(conn, session_id)
    after = compaction.last_message_id if compaction else 0
    found = conn.execute(
        "SELECT id, content, untrusted, attachments FROM messages WHERE session_id = ?"
        " AND id > ? AND role = 'user' AND undone_at IS NULL"
        " AND NOT (content IS ? AND untrusted IS ?) ORDER BY id DESC LIMIT 1",
        (session_id, after, SHOWN, SHOWN_WHY),
    ).fetchone()
    if found is None:
        return None
    conn.execute(
        "UPDATE messages SET undone_at = ? WHERE session_id = ? AND id >= ? AND undone_at IS NULL",
        (now, session_id, found[0]),
    )
    return Undone(found[1] or "", found[2], found[3])


def continue_turn(
    conn: apsw.Connection,
    session_id: str,
    source: str,
    text: str,
    now: float,
    untrusted: str | None = None,
    attachments: str | None = None,
) -> int:
    """The user's message of a turn (`untrusted`: why its text is not an owner's;
    `attachments`: its files, as JSON). The session is made if it is not there yet (its
    first turn) or gone (a restored backup erased it), so the turn carries on."""
    message = NewMessage(
        session_id, "user", text, timestamp=now, untrusted=untrusted, attachments=attachments
    )
    try:
        return append_message(conn, message)  # nothing written when its session is missing
    except SessionNotFound:
        ensure_session(conn, NewSession(session_id, source=source, started_at=now))
        return append_message(conn, message)
