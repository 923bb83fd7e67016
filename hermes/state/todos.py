"""A session's todo list: the short checklist the model keeps on a long task (the `todo`
tool), kept with the session in state.db so that `/todo`, the progress message and a turn
resumed after a restart all see it. Functions of a connection, run through the Db handle."""

from __future__ import annotations

import json

import apsw
import attrs

from hermes.state.errors import SessionNotFound

STATUSES = ("pending", "in_progress", "done")
MAX_ITEMS = 20
MAX_TEXT = 200  # characters of one item


@attrs.frozen
class TodoItem:
    text: str
    status: str = "pending"


def todo_of(conn: apsw.Connection, session_id: str) -> list[TodoItem]:
    """The session's list, in order; [] for none (or no such session)."""
    row = conn.execute("SELECT todo FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None or not row[0]:
        return []
    return [TodoItem(str(i["text"]), str(i["status"])) for i in json.loads(row[0])]


def set_todo(conn: apsw.Connection, session_id: str, items: list[TodoItem]) -> None:
    """Replace the session's list ([] clears it)."""
    text = json.dumps([attrs.asdict(i) for i in items]) if items else None
    conn.execute("UPDATE sessions SET todo = ? WHERE id = ?", (text, session_id))
    if not conn.changes():
        raise SessionNotFound(session_id)
