"""The inbound journal: every event an adapter receives, recorded before it is acknowledged.

Admission before acknowledgement: an adapter hands each event to `admit`,
which commits a row keyed by (platform, event id) and only then lets the
adapter acknowledge it to the platform. A duplicate (a retried envelope, a
replay after a resume) finds its key and starts nothing.

Who owns an event's turn is written in its row, once. While a router runs,
admission writes the event already started by that router (`owner`: its
host, pid and a nonce per incarnation), in the one commit before the
acknowledgement, so nothing more is committed before the model is called.
When no router runs, the row waits as admitted, and the router that starts
`claim`s it (admitted -> started, exactly once). A turn started and never
answered (a drain or a crash cut it, or its router died before it began) is
resumed once, by a later router, if its owner is gone and it is young enough
(`claim_interrupted`). Rows are pruned after a retention window.

These are functions of a connection, run through the Db handle.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket

import apsw
import attrs

from hermes.adapters.contract import ChatType, Cursor, InboundEvent, Recorded
from hermes.adapters.cursors import put_cursor
from hermes.delivery.replies import Then

ADMITTED, STARTED, ANSWERED, REFUSED, RESUMED = (
    "admitted",
    "started",
    "answered",
    "refused",
    "resumed",
)

_FIELDS = [f.name for f in attrs.fields(InboundEvent)]


_ADMIT = (
    f"INSERT INTO inbound_journal ({', '.join(_FIELDS)}, state, owner, received_at, started_at)"
    f" VALUES ({', '.join(f':{n}' for n in _FIELDS)}, :state, :owner, :now, :started)"
    " ON CONFLICT (platform, event_id) DO NOTHING"
)


def admit(
    conn: apsw.Connection,
    event: InboundEvent,
    now: float,
    owner: str | None,
    cursor: Cursor | None = None,
) -> bool:
    """Record the event, started by `owner` (the live router) or else admitted for the
    next router to claim, and the adapter's `cursor` with it; False if its key was
    already admitted (a duplicate)."""
    values = attrs.asdict(event, recurse=False)
    values["chat_type"] = str(event.chat_type)
    values["attachments"] = json.dumps(list(event.attachments))
    values["is_bot"] = int(event.is_bot)
    values["mentioned"] = int(event.mentioned)
    values["replied"] = int(event.replied)
    values["state"] = ADMITTED if owner is None else STARTED
    values["owner"] = owner
    values["now"] = now
    values["started"] = None if owner is None else now
    conn.execute(_ADMIT, values)
    added = conn.changes() == 1
    if cursor is not None:
        put_cursor(conn, cursor.key, cursor.value, now, cursor.rising)
    return added


def recorded(conn: apsw.Connection, platform: str, event_id: str) -> Recorded | None:
    """How the event ended: answered (with its final step's kind and text, as `ended_with`
    wrote them), or refused; None while it is admitted or its turn runs (or waits to be
    resumed)."""
    row = conn.execute(
        "SELECT state, session_id, finished_at, ended, answer FROM inbound_journal"
        " WHERE platform = ? AND event_id = ?",
        (platform, event_id),
    ).fetchone()
    if row is None or row[0] not in (ANSWERED, REFUSED):
        return None
    state, session_id, finished, ended, answer = row
    if state == REFUSED or ended is not None or session_id is None:
        return Recorded(state, answer or "", ended)
    # Closed, and serve stopped before its ending was written: the answer its turn's
    # settling commit wrote (the session's last at that moment).
    said = conn.execute(
        "SELECT content FROM messages WHERE session_id = ? AND role = 'assistant'"
        " AND tool_calls IS NULL AND content IS NOT NULL AND timestamp <= ?"
        " ORDER BY id DESC LIMIT 1",
        (session_id, finished),
    ).fetchone()
    return Recorded(state, said[0] if said else "", None)


def ended_with(platform: str, event_id: str, kind: str, text: str) -> Then:
    """The write that keeps how an event's turn ended, for a platform that answers within
    the request (`recorded` reads it back)."""

    def write(conn: apsw.Connection, _now: float) -> None:
        conn.execute(
            "UPDATE inbound_journal SET ended = ?, answer = ? WHERE platform = ? AND event_id = ?",
            (kind, text, platform, event_id),
        )

    return write


def release(conn: apsw.Connection, platform: str, event_id: str, owner: str) -> None:
    """The router `owner` was gone before it heard of the event admitted for it: back to
    admitted, for the router that runs next (unless one resumed it already)."""
    conn.execute(
        "UPDATE inbound_journal SET state = ?, owner = NULL, started_at = NULL"
        " WHERE platform = ? AND event_id = ? AND state = ? AND owner = ?",
        (ADMITTED, platform, event_id, STARTED, owner),
    )


def _event(row: tuple) -> InboundEvent:
    values = dict(zip(_FIELDS, row, strict=True))
    values["chat_type"] = ChatType(values["chat_type"])
    values["attachments"] = tuple(json.loads(values["attachments"]))
    values["is_bot"] = bool(values["is_bot"])
    values["mentioned"] = bool(values["mentioned"])
    values["replied"] = bool(values["replied"])
    return InboundEvent(**values)


_SELECT = f"SELECT {', '.join(_FIELDS)} FROM inbound_journal"


def claim(conn: apsw.Connection, platform: str, event_id: str, owner: str, now: float) -> bool:
    """Move an admitted event to started; False if it was already taken (never twice)."""
    conn.execute(
        "UPDATE inbound_journal SET state = ?, owner = ?, started_at = ?"
        " WHERE platform = ? AND event_id = ? AND state = ?",
        (STARTED, owner, now, platform, event_id, ADMITTED),
    )
    return conn.changes() == 1


def finish(
    conn: apsw.Connection,
    platform: str,
    event_id: str,
    state: str,
    session_id: str | None,
    now: float,
) -> None:
    """The event's turn ended (answered) or it was refused: it is never taken again."""
    conn.execute(
        "UPDATE inbound_journal SET state = ?, session_id = COALESCE(?, session_id),"
        " finished_at = ? WHERE platform = ? AND event_id = ?",
        (state, session_id, now, platform, event_id),
    )


@attrs.define
class Closings:
    """The journal rows one turn answers, closed together as a write of (conn, now): a
    burst's parts (the last, its lead, is the one its answer replies to), and the
    messages that steered it. A steered message is added while the turn runs; the write
    reads the list when it commits (with the final message)."""

    state: str
    session_id: str | None
    events: list[tuple[str, str]] = attrs.Factory(list)  # (platform, event id); lead last

    @property
    def lead(self) -> str:
        return ":".join(self.events[-1])

    def join_parts(self, conn: apsw.Connection, _now: float = 0.0) -> None:
        """A burst's earlier parts are its lead's turn's, so a restart resumes them as one."""
        join(conn, self.lead, self.events[:-1], steered=False)

    def absorb(self, other: Closings) -> Then:
        """`other`'s rows are this turn's to close now (it joined this turn as it ran);
        returns the write that records so, with the message it joined as."""
        joined, lead = list(other.events), self.lead
        self.events[-1:-1] = joined  # the lead stays last
        other.events.clear()
        return lambda conn, _now: join(conn, lead, joined, steered=True)

    def __call__(self, conn: apsw.Connection, now: float) -> None:
        for platform, event_id in self.events:
            finish(conn, platform, event_id, self.state, self.session_id, now)


def join(conn: apsw.Connection, lead: str, events: list[tuple[str, str]], steered: bool) -> None:
    """`events` are answered by the turn of `lead` (`platform:event id`)."""
    conn.executemany(
        "UPDATE inbound_journal SET answered_by = ?, steered = ? WHERE platform = ?"
        " AND event_id = ?",
        [(lead, int(steered), platform, event_id) for platform, event_id in events],
    )


def joined_to(conn: apsw.Connection, events: list[InboundEvent]) -> dict[str, tuple[str, bool]]:
    """Of `events` (resumed after a restart), those another's turn answers: by
    `platform:event id`, that turn's lead and whether the event steered it."""
    found = {}
    for event in events:
        row = conn.execute(
            "SELECT answered_by, steered FROM inbound_journal WHERE platform = ? AND event_id = ?"
            " AND answered_by IS NOT NULL",
            (event.platform, event.event_id),
        ).fetchone()
        if row is not None:
            found[f"{event.platform}:{event.event_id}"] = (row[0], bool(row[1]))
    return found


def admitted(conn: apsw.Connection, before: float = math.inf) -> list[InboundEvent]:
    """Events admitted (before `before`) and never started: the process stopped between
    the two, or no router was there to tell."""
    rows = conn.execute(
        f"{_SELECT} WHERE state = ? AND received_at < ? ORDER BY received_at", (ADMITTED, before)
    )
    return [_event(r) for r in rows]


def owner_gone(owner: str, me: str) -> bool:
    """Whether the router that started a turn is gone: owners are `host:pid:nonce`, one
    nonce per router incarnation. Only a router of this host can be known to be gone:
    an earlier incarnation in this process, or a process that is dead (a live second
    serve's turns are its own to finish)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if owner != me and owner.rpartition(":")[0] == me.rpartition(":")[0]:
        return True  # this process, an earlier router
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim_interrupted(
    conn: apsw.Connection, owner: str, now: float, window: float
) -> list[InboundEvent]:
    """Turns started and never answered by a serve that is gone, younger than `window`
    seconds: claimed for one resume by `owner` (another serve or a later restart cannot
    take them again)."""
    rows = conn.execute(
        f"SELECT {', '.join(_FIELDS)}, owner FROM inbound_journal"
        " WHERE state = ? AND started_at >= ? ORDER BY received_at",
        (STARTED, now - window),
    ).fetchall()
    taken = []
    for *row, started_by in rows:
        if started_by == owner or not owner_gone(started_by or "", owner):
            continue
        event = _event(tuple(row))
        conn.execute(
            "UPDATE inbound_journal SET state = ?, owner = ? WHERE platform = ? AND event_id = ?"
            " AND state = ?",
            (RESUMED, owner, event.platform, event.event_id, STARTED),
        )
        if conn.changes() == 1:
            taken.append(event)
    return taken


def new_owner() -> str:
    """A router incarnation's name in the journal."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def prune(conn: apsw.Connection, before: float) -> int:
    """Forget events received before `before` (the retention window) that are done with:
    answered or refused, or taken before `before` too (no turn runs that long, and the
    resume window is long past). An event never taken stays: the router takes it.
    Returns how many."""
    conn.execute(
        "DELETE FROM inbound_journal WHERE received_at < ? AND (state IN (?, ?)"
        " OR (state IN (?, ?) AND started_at < ?))",
        (before, ANSWERED, REFUSED, STARTED, RESUMED, before),
    )
    return conn.changes()


def first_since(
    conn: apsw.Connection,
    platform: str,
    since: float,
    text: str | None = None,
    user_id: str | None = None,
) -> InboundEvent | None:
    """The first event on `platform` received at `since` or later, whose text holds `text`
    and whose sender is `user_id` (each when given): what `hermes setup` waits for (the
    code it showed, the owner's answer), whatever the router made of the event."""
    query = f"{_SELECT} WHERE platform = ? AND received_at >= ?"
    values: list[object] = [platform, since]
    if text is not None:
        query += " AND instr(text, ?) > 0"
        values.append(text)
    if user_id is not None:
        query += " AND user_id = ?"
        values.append(user_id)
    row = conn.execute(query + " ORDER BY received_at LIMIT 1", values).fetchone()
    return None if row is None else _event(row)
