"""Approval requests: a guarded command that waits for an owner's yes, as rows.

A request is opened pending (or approved at once when an owner said "always" for
that exact command, in that directory, in that session), then ends once:
approved, denied, expired (its deadline passed, or serve stopped while it
waited) or cancelled (/stop, a newer message, a drain). A decision on a request
that has ended finds it as it ended and changes nothing. Functions of an apsw
connection, run through the Db handle.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable

import apsw
import attrs

from hermes.actors.errors import Invalid, NotFound
from hermes.state.errors import StateError

PENDING, APPROVED, DENIED, EXPIRED, CANCELLED = (
    "pending",
    "approved",
    "denied",
    "expired",
    "cancelled",
)
ALWAYS = "always for this session"  # decided_by of a request an owner's "always" approved
RESTARTED = "hermes restarted"  # decided_by of a request pending when serve stopped


@attrs.frozen
class Approval:
    id: str
    session_id: str
    call_id: str | None
    command: str  # as the prompt showed it (redacted)
    cwd: str
    reason: str
    platform: str
    chat_id: str | None
    user_id: str
    user_name: str | None
    owner: str  # the router that waits on it (host:pid:nonce)
    asked_in: str | None  # the chat its prompt went to (platform:chat[:thread]); None: none
    created_at: float
    expires_at: float
    state: str
    always: bool
    decided_by: str | None
    decided_at: float | None

    @property
    def asker(self) -> str:
        name = f"{self.user_name} " if self.user_name else ""
        return f"{name}({self.platform} {self.user_id})"

    def outcome(self) -> str:
        """How it ended, in words (for the one who decides too late, and the operator)."""
        by = f" by {self.decided_by}" if self.decided_by else ""
        return f"request {self.id} was {self.state}{by}"


@attrs.frozen
class NewApproval:
    """What a turn asks: its command as it would run and as it is shown (redacted),
    where it would run, why the guard stopped it, whose turn it is, and where its
    prompt goes."""

    session_id: str
    command: str
    shown: str
    cwd: str
    reason: str
    platform: str
    chat_id: str | None
    user_id: str
    user_name: str | None
    owner: str
    timeout: float
    call_id: str | None = None
    asked_in: str | None = None

    @property
    def matches(self) -> str:
        """What an "always" is for: this command, run in this directory."""
        return hashlib.sha256(f"{self.cwd}\0{self.command}".encode()).hexdigest()


class ApprovalNotFound(StateError, NotFound):
    def __init__(self, request_id: str) -> None:
        super().__init__(f"no approval request {request_id!r}")
        self.request_id = request_id


class ApprovalEnded(StateError, Invalid):
    """A decision on a request that is no longer pending: it says how it ended."""

    def __init__(self, approval: Approval) -> None:
        super().__init__(f"{approval.outcome()}; nothing changed")
        self.approval = approval


_COLUMNS = (
    "id, session_id, call_id, command, cwd, reason, platform, chat_id, user_id, user_name,"
    " owner, asked_in, created_at, expires_at, state, always, decided_by, decided_at"
)


def _row(values: tuple) -> Approval:
    *head, always, decided_by, decided_at = values
    return Approval(*head, bool(always), decided_by, decided_at)


def get_approval(conn: apsw.Connection, request_id: str) -> Approval:
    found = conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (request_id,))
    row = found.fetchone()
    if row is None:
        raise ApprovalNotFound(request_id)
    return _row(row)


def open_approval(conn: apsw.Connection, new: NewApproval, now: float) -> Approval:
    """The request, in the transaction of the guard's verdict: pending, or approved at
    once if an owner approved this command in this directory in this session "always"."""
    always = conn.execute(
        "SELECT decided_by FROM approvals WHERE session_id = ? AND matches = ? AND always = 1"
        " AND state = ? ORDER BY created_at DESC LIMIT 1",
        (new.session_id, new.matches, APPROVED),
    ).fetchone()
    request_id = secrets.token_hex(3)  # short, to type: /approve 3f9a1c
    while conn.execute("SELECT 1 FROM approvals WHERE id = ?", (request_id,)).fetchone():
        request_id = secrets.token_hex(3)
    state, by = (APPROVED, f"{ALWAYS} ({always[0]})") if always else (PENDING, None)
    conn.execute(
        f"INSERT INTO approvals ({_COLUMNS}, matches) VALUES ({','.join('?' * 19)})",
        (
            request_id,
            new.session_id,
            new.call_id,
            new.shown,
            new.cwd,
            new.reason,
            new.platform,
            new.chat_id,
            new.user_id,
            new.user_name,
            new.owner,
            None if always else new.asked_in,
            now,
            now + new.timeout,
            state,
            0,
            by,
            now if always else None,
            new.matches,
        ),
    )
    return get_approval(conn, request_id)


def decide(
    conn: apsw.Connection,
    request_id: str,
    approve: bool,
    by: str,
    now: float,
    always: bool = False,
) -> tuple[Approval, bool]:
    """An owner's decision: the request as it is after it, and whether this decided it
    (False: it had ended; one whose deadline has passed is expired now, and stays so)."""
    found = get_approval(conn, request_id)
    if found.state == PENDING and found.expires_at <= now:
        return end_approval(conn, request_id, EXPIRED, None, now), False
    if found.state != PENDING:
        return found, False
    conn.execute(
        "UPDATE approvals SET state = ?, always = ?, decided_by = ?, decided_at = ?"
        " WHERE id = ? AND state = ?",
        (APPROVED if approve else DENIED, int(approve and always), by, now, request_id, PENDING),
    )
    return get_approval(conn, request_id), True


def end_approval(
    conn: apsw.Connection, request_id: str, state: str, by: str | None, now: float
) -> Approval:
    """The waiting turn ends it (expired, cancelled) unless a decision came first;
    returns it as it is now."""
    conn.execute(
        "UPDATE approvals SET state = ?, decided_by = ?, decided_at = ? WHERE id = ? AND state = ?",
        (state, by, now, request_id, PENDING),
    )
    return get_approval(conn, request_id)


def expire_abandoned(
    conn: apsw.Connection, gone: Callable[[str], bool], now: float
) -> list[Approval]:
    """Pending requests nobody waits on any more: their router is `gone` (serve stopped
    or was killed while they waited: RESTARTED), or their deadline has passed (a router
    this one cannot see, on another host). Expired, never run; returns them."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM approvals WHERE state = ?", (PENDING,))
    ended = []
    for approval in [_row(r) for r in rows]:
        if gone(approval.owner):
            ended.append(end_approval(conn, approval.id, EXPIRED, RESTARTED, now))
        elif approval.expires_at <= now:
            ended.append(end_approval(conn, approval.id, EXPIRED, None, now))
    return ended


def approvals(
    conn: apsw.Connection, now: float, pending_only: bool = True, limit: int = 50
) -> list[Approval]:
    """Requests that wait (pending, before their deadline), oldest first; or
    (`pending_only` False) the latest `limit` of all."""
    if pending_only:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM approvals WHERE state = ? AND expires_at > ?"
            " ORDER BY created_at",
            (PENDING, now),
        )
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM approvals ORDER BY created_at DESC LIMIT ?", (limit,)
        )
    return [_row(r) for r in rows]


def restarted_while_waiting(
    conn: apsw.Connection, session_id: str, call_ids: list[str]
) -> list[Approval]:
    """What these tool calls of the session were waiting for when serve stopped (a
    resumed turn says so)."""
    marks = ",".join("?" * len(call_ids))
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE session_id = ? AND call_id IN ({marks})"
        " AND state = ? AND decided_by = ? ORDER BY created_at",
        (session_id, *call_ids, EXPIRED, RESTARTED),
    )
    return [_row(r) for r in rows]


def prune_approvals(conn: apsw.Connection, before: float) -> int:
    """Forget requests that ended before `before`; "always" approvals stay while their
    session may still ask. Returns how many."""
    conn.execute(
        "DELETE FROM approvals WHERE state != ? AND always = 0 AND created_at < ?",
        (PENDING, before),
    )
    return conn.changes()
