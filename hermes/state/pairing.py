"""DM pairing's tables and rules: a stranger gets a code, an owner approves it.

Every function takes an apsw connection and runs inside a write transaction
(`await db.write(request_code, ...)`).
Codes are stored only as a hash, never in plain text, and live an hour; the
owner sees a two-character hint. The lockout counts failed approvals per
platform: five within an hour lock approvals for an hour, valid codes
included, so guessing a code is hopeless even within its hour.

A stranger is answered at most once an hour however often they write
(`pairing_replies`), and a full platform makes room by dropping its oldest
request, so strangers can neither make the bot spam nor lock pairing for others.

Pairing makes an owner only when the operator says so (`--owner`), and never
while config names owners (hermes.operations.pairing.owner_settings): a stranger's
code must not be a way to the owner's tools.

`attempt_approval` returns a Refusal instead of raising: the failure it
records must commit, and a write that raises is rolled back. The operator
action (hermes.operations.pairing) raises it after the commit.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

import apsw
import attrs

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, no 1/I: nothing to misread
CODE_LENGTH = 8
HINT_LENGTH = 2
CODE_TTL = 3600.0
MAX_PENDING = 3  # per platform; a new request evicts the oldest
REPLY_INTERVAL = 3600.0  # a stranger is sent at most one code in this long
LOCK_FAILURES = 5  # failed approvals within LOCK_WINDOW lock a platform ...
LOCK_WINDOW = 3600.0
LOCK_SECONDS = 3600.0  # ... for this long after the last of them


@attrs.frozen
class Refusal:
    """Why an approval was not done: a wrong or expired code, or a locked platform
    (`locked_until` set). Returned, never raised: the failure it records must commit."""

    platform: str
    reason: str
    locked_until: float | None = None


def _locked(platform: str, until: float) -> Refusal:
    when = datetime.fromtimestamp(until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Refusal(
        platform,
        f"approvals for {platform} are locked until {when}: {LOCK_FAILURES} failed"
        f" approvals within {LOCK_WINDOW / 60:.0f} minutes (valid codes are refused too)",
        until,
    )


@attrs.frozen
class PairingOffer:
    """What to tell a user who asked to pair.

    `code` is set only for a new request. `quiet`: they were sent a code within
    REPLY_INTERVAL (pending, or dropped since), so nothing is said: every answer
    to a stranger is a message someone else can make the bot send.
    `already_approved`: they are in already.
    """

    platform: str
    user_id: str
    code: str | None
    expires_at: float | None
    quiet: bool = False
    already_approved: bool = False

    def message(self, now: float) -> str:
        """The text to send back to the user; empty when nothing is to be sent."""
        if self.already_approved:
            return "You are already approved; just write your message."
        if self.quiet or self.code is None:
            return ""
        minutes = max(1, round(((self.expires_at or now) - now) / 60))
        return (
            f"I don't know you yet. Your pairing code is {self.code}. Ask my owner to run\n"
            f"  hermes pairing approve {self.platform} {self.code}\n"
            f"The code expires in {minutes} min."
        )


@attrs.frozen
class Approved:
    platform: str
    user_id: str
    user_name: str | None
    owner: bool
    approved_at: float


@attrs.frozen
class PendingRequest:
    platform: str
    user_id: str
    user_name: str | None
    age: float  # seconds since the code was sent
    code_hint: str


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def code_hash(platform: str, code: str) -> str:
    """Bound to the platform: a code sent on one platform approves nothing on another."""
    return hashlib.sha256(f"{platform}\0{code}".encode()).hexdigest()


def normalise(code: str) -> str:
    """A code as typed (a pairing code, a link code), as it was sent: no spaces or dashes,
    upper case."""
    return code.strip().replace(" ", "").replace("-", "").upper()


def _is_approved(conn: apsw.Connection, platform: str, user_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pairing_approved WHERE platform = ? AND user_id = ?", (platform, user_id)
    ).fetchone()
    return row is not None


def request_code(
    conn: apsw.Connection,
    platform: str,
    user_id: str,
    user_name: str | None,
    now: float,
    chat_id: str | None = None,
) -> PairingOffer:
    """A new pairing code for a user, or what to tell them if they need none. `chat_id`
    is their DM, where they are told once they are approved.

    Quiet for a user sent a code within REPLY_INTERVAL. When the platform has
    MAX_PENDING requests pending, the oldest is dropped (its code stops working,
    its user is not told): a flood of strangers cannot keep a friend out for good.
    """
    conn.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (now,))
    conn.execute("DELETE FROM pairing_replies WHERE replied_at <= ?", (now - REPLY_INTERVAL,))
    if _is_approved(conn, platform, user_id):
        return PairingOffer(platform, user_id, None, None, already_approved=True)
    answered = conn.execute(
        "SELECT 1 FROM pairing_replies WHERE platform = ? AND user_id = ?"
        " UNION ALL SELECT 1 FROM pairing_requests WHERE platform = ? AND user_id = ?",
        (platform, user_id, platform, user_id),
    ).fetchone()
    if answered is not None:
        return PairingOffer(platform, user_id, None, None, quiet=True)
    crowd = conn.execute(
        "SELECT count(*) FROM pairing_requests WHERE platform = ?", (platform,)
    ).get
    if crowd >= MAX_PENDING:  # the oldest make room; their pairing_replies rows stay
        conn.execute(
            "DELETE FROM pairing_requests WHERE rowid IN (SELECT rowid FROM pairing_requests"
            " WHERE platform = ? ORDER BY created_at, user_id LIMIT ?)",
            (platform, crowd - MAX_PENDING + 1),
        )
    code = new_code()
    conn.execute(
        "INSERT INTO pairing_requests (platform, user_id, user_name, code_hash, code_hint,"
        " created_at, expires_at, chat_id) VALUES (?,?,?,?,?,?,?,?)",
        (
            platform,
            user_id,
            user_name,
            code_hash(platform, code),
            code[:HINT_LENGTH],
            now,
            now + CODE_TTL,
            chat_id,
        ),
    )
    conn.execute(
        "INSERT OR REPLACE INTO pairing_replies (platform, user_id, replied_at) VALUES (?,?,?)",
        (platform, user_id, now),
    )
    return PairingOffer(platform, user_id, code, now + CODE_TTL)


def locked_until(conn: apsw.Connection, platform: str, now: float) -> float | None:
    """When approvals on `platform` unlock, or None if they are not locked.

    Locked for LOCK_SECONDS after any failure that was the LOCK_FAILURES-th
    within LOCK_WINDOW. Attempts while locked are not counted, so the lock
    cannot be stretched forever by someone who keeps guessing.
    """
    since = now - LOCK_WINDOW - LOCK_SECONDS
    times = [
        r[0]
        for r in conn.execute(
            "SELECT at FROM pairing_failures WHERE platform = ? AND at > ? ORDER BY at",
            (platform, since),
        )
    ]
    until = None
    for i in range(LOCK_FAILURES - 1, len(times)):
        if times[i] - times[i - LOCK_FAILURES + 1] <= LOCK_WINDOW:
            until = times[i] + LOCK_SECONDS
    return until if until is not None and now < until else None


def attempt_approval(
    conn: apsw.Connection,
    platform: str,
    code: str,
    now: float,
    approved_by: str = "cli",
    owner: bool = False,
) -> Approved | Refusal:
    """Approve the user whose pending request has this code (as an owner of `platform`
    when `owner`: the caller has checked `owner_settings`), or say why not.

    A wrong or expired code is recorded as a failure (the lockout counts
    them); the refusal is returned, not raised, so that record commits.
    """
    conn.execute("DELETE FROM pairing_failures WHERE at <= ?", (now - LOCK_WINDOW - LOCK_SECONDS,))
    until = locked_until(conn, platform, now)
    if until is not None:
        return _locked(platform, until)
    row = conn.execute(
        "SELECT user_id, user_name, chat_id FROM pairing_requests"
        " WHERE platform = ? AND code_hash = ? AND expires_at > ?",
        (platform, code_hash(platform, normalise(code)), now),
    ).fetchone()
    if row is None:
        conn.execute("INSERT INTO pairing_failures (platform, at) VALUES (?, ?)", (platform, now))
        return Refusal(
            platform,
            f"no pending request with that code on {platform} (wrong, expired or already"
            " used; `hermes pairing list` shows the pending ones)",
        )
    return _approve(conn, platform, *row, now, approved_by, owner)


def deny_request(conn: apsw.Connection, platform: str, user_id: str) -> bool:
    """Drop a pending request (its code stops working); False if there was none. The user
    may ask again once REPLY_INTERVAL has passed since they were sent the code."""
    conn.execute(
        "DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?", (platform, user_id)
    )
    return conn.changes() > 0


def _approve(
    conn: apsw.Connection,
    platform: str,
    user_id: str,
    user_name: str | None,
    chat_id: str | None,
    now: float,
    approved_by: str,
    owner: bool,
) -> Approved:
    conn.execute(
        "INSERT INTO pairing_approved (platform, user_id, user_name, approved_at, approved_by,"
        " owner, chat_id) VALUES (?,?,?,?,?,?,?)",
        (platform, user_id, user_name, now, approved_by, int(owner), chat_id),
    )
    for table in ("pairing_requests", "pairing_replies"):  # revoked, they may ask again
        conn.execute(f"DELETE FROM {table} WHERE platform = ? AND user_id = ?", (platform, user_id))
    return Approved(platform, user_id, user_name, owner, now)


def revoke(conn: apsw.Connection, platform: str, user_id: str) -> bool:
    """Remove a user approved by pairing; False if they were not. Config allowlists
    are not touched (they live in config.yaml)."""
    conn.execute(
        "DELETE FROM pairing_approved WHERE platform = ? AND user_id = ?", (platform, user_id)
    )
    return conn.changes() > 0


def approved(conn: apsw.Connection) -> list[Approved]:
    """Everyone pairing let in, on every platform, in the order they were approved."""
    rows = conn.execute(
        "SELECT platform, user_id, user_name, owner, approved_at FROM pairing_approved"
        " ORDER BY approved_at"
    )
    return [Approved(p, u, name, bool(o), at) for p, u, name, o, at in rows]


def approved_users(conn: apsw.Connection, platform: str) -> frozenset[str]:
    rows = conn.execute("SELECT user_id FROM pairing_approved WHERE platform = ?", (platform,))
    return frozenset(r[0] for r in rows)


def owners(conn: apsw.Connection, platform: str) -> frozenset[str]:
    """Those approved as owners of `platform` (they are owners only while
    `owner_settings` names none). Rows the first approval on a platform made owner,
    before `--owner` existed, are kept: the operator approved them, most often
    themselves."""
    rows = conn.execute(
        "SELECT user_id FROM pairing_approved WHERE platform = ? AND owner = 1", (platform,)
    )
    return frozenset(r[0] for r in rows)


@attrs.frozen
class Welcome:
    """An approved user not yet told they are in: where to tell them."""

    platform: str
    user_id: str
    chat_id: str
    owner: bool
    approved_at: float

    @property
    def key(self) -> str:
        """Its outbox key: one welcome per approval (approved again, told again)."""
        return f"welcome:{self.platform}:{self.user_id}:{self.approved_at!r}"

    def message(self) -> str:
        extra = " You are an owner: /sethome makes a chat my home channel." if self.owner else ""
        return f"You are approved: write your message and I will answer.{extra}"


def to_welcome(conn: apsw.Connection) -> list[Welcome]:
    """Approvals whose user has not been told yet (the CLI approves; serve tells)."""
    rows = conn.execute(
        "SELECT platform, user_id, chat_id, owner, approved_at FROM pairing_approved"
        " WHERE notified_at IS NULL AND chat_id IS NOT NULL ORDER BY approved_at"
    )
    return [Welcome(p, u, c, bool(o), at) for p, u, c, o, at in rows]


def welcomed(conn: apsw.Connection, platform: str, user_id: str, now: float) -> None:
    conn.execute(
        "UPDATE pairing_approved SET notified_at = ? WHERE platform = ? AND user_id = ?",
        (now, platform, user_id),
    )


def pending(conn: apsw.Connection, now: float) -> list[PendingRequest]:
    """Unexpired requests on every platform, oldest first (read-only: expired rows stay
    until the next write sees them)."""
    rows = conn.execute(
        "SELECT platform, user_id, user_name, created_at, code_hint FROM pairing_requests"
        " WHERE expires_at > ? ORDER BY created_at, platform, user_id",
        (now,),
    )
    return [PendingRequest(p, u, name, now - created, hint) for p, u, name, created, hint in rows]


def prune_failures(conn: apsw.Connection, before: float) -> int:
    """Forget failed approvals made before `before` (the lockout looks back two hours);
    returns how many."""
    conn.execute("DELETE FROM pairing_failures WHERE at < ?", (before,))
    return conn.changes()
