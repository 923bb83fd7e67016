"""Questions a turn asks its user (the clarify tool), as rows: opened pending, then
ended once: answered (with the answer and who gave it), expired (no answer in time, or
serve stopped while it waited) or cancelled (/stop, a newer message, a drain). Functions
of an apsw connection, run through the Db handle."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable

import apsw
import attrs

from hermes.actors.errors import NotFound

PENDING, ANSWERED, EXPIRED, CANCELLED = "pending", "answered", "expired", "cancelled"
RESTARTED = "hermes restarted"


@attrs.frozen
class Question:
    id: str
    session_id: str
    platform: str
    user_id: str  # who is asked: the user whose message started the turn
    question: str
    choices: tuple[str, ...]
    owner: str  # the router that waits on it (host:pid:nonce)
    state: str
    answer: str | None
    answered_by: str | None
    created_at: float
    expires_at: float


_COLUMNS = (
    "id, session_id, platform, user_id, question, choices, owner, state, answer,"
    " answered_by, created_at, expires_at"
)


def _question(row: tuple) -> Question:
    values = list(row)
    values[5] = tuple(json.loads(values[5]))
    return Question(*values)


def open_question(
    conn: apsw.Connection,
    session_id: str,
    platform: str,
    user_id: str,
    question: str,
    choices: tuple[str, ...],
    owner: str,
    now: float,
    timeout: float,
) -> Question:
    qid = secrets.token_hex(3)
    conn.execute(
        f"INSERT INTO questions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,NULL,NULL,?,?)",
        (
            qid,
            session_id,
            platform,
            user_id,
            question,
            json.dumps(list(choices)),
            owner,
            PENDING,
            now,
            now + timeout,
        ),
    )
    return get_question(conn, qid)


def get_question(conn: apsw.Connection, qid: str) -> Question:
    row = conn.execute(f"SELECT {_COLUMNS} FROM questions WHERE id = ?", (qid,)).fetchone()
    if row is None:
        raise NotFound(f"no question {qid!r}")
    return _question(row)


def end_question(
    conn: apsw.Connection,
    qid: str,
    state: str,
    now: float,
    answer: str | None = None,
    by: str | None = None,
) -> Question:
    """End a pending question; one that ended already is returned as it ended."""
    conn.execute(
        "UPDATE questions SET state = ?, answer = ?, answered_by = ?, ended_at = ?"
        " WHERE id = ? AND state = ?",
        (state, answer, by, now, qid, PENDING),
    )
    return get_question(conn, qid)


def expire_left(conn: apsw.Connection, gone: Callable[[str], bool], now: float) -> int:
    """At a router's start: what a gone router's turns asked is expired (nobody waits)."""
    rows = conn.execute("SELECT id, owner FROM questions WHERE state = ?", (PENDING,))
    ended = [qid for qid, owner in rows.fetchall() if gone(owner)]
    for qid in ended:
        end_question(conn, qid, EXPIRED, now, None, RESTARTED)
    return len(ended)
