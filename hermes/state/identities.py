"""One person on many platforms: accounts linked by a one-time code, and a chat attached
to a session of another chat (`/continue`).

Every function takes an apsw connection; writes run in a write transaction
(`await db.write(redeem, ...)`), reads on a read connection (`db.read`).

A person is only ever two or more accounts: a lone account is not linked, so
unlinking the second-to-last account of a person removes the person. Linking is
done by the accounts themselves: `/link` on one gives a code that `/link CODE` on
the other redeems within LINK_TTL. Codes are stored only as a hash, like
pairing's. An owner links only with an owner (`redeem`): a linked account may
continue the other's conversations, so a user's account must never reach an
owner's.

`redeem` returns a LinkRefused instead of raising: a user's wrong code is an
answer in the chat, not an error.
"""

from __future__ import annotations

import hashlib
import secrets

import apsw
import attrs

from hermes.config import Role
from hermes.state.pairing import new_code, normalise

LINK_TTL = 600.0  # seconds a link code lives

WRONG_CODE = (
    "That link code is wrong or has expired; send /link on your other account for a new one."
)
SAME_ACCOUNT = "That code links this account to another one: send it from your other account."
SAME_PLATFORM = (
    "That code is for your account on another platform; it is used up now: send /link"
    " again for a new one."
)
OWNER_MISMATCH = (
    "An owner link needs an owner on both accounts: an owner's account links only with"
    " another owner's."
)


@attrs.frozen
class Linked:
    """The accounts are one person now; `accounts` are all of that person's."""

    person: str
    accounts: list[tuple[str, str]]  # (platform, user_id)


@attrs.frozen
class LinkRefused:
    """Why a code linked nothing: a sentence meant for the chat."""

    reason: str


@attrs.frozen
class Identity:
    person: str
    platform: str
    user_id: str
    linked_at: float


def _hash(code: str) -> str:
    """What is stored of a code, as its user types it: spaces and dashes dropped, upper case.
    Not bound to a platform: the code is redeemed on another one."""
    return hashlib.sha256(normalise(code).encode()).hexdigest()


def _new_person() -> str:
    return "p_" + secrets.token_hex(6)


def issue_code(conn: apsw.Connection, platform: str, user_id: str, role: Role, now: float) -> str:
    """A new one-time code for this account to redeem on another. The account's earlier
    codes stop working (only the last one shown is good), and expired codes are pruned."""
    conn.execute("DELETE FROM link_codes WHERE expires_at <= ?", (now,))
    conn.execute("DELETE FROM link_codes WHERE platform = ? AND user_id = ?", (platform, user_id))
    code = new_code()
    conn.execute(
        "INSERT INTO link_codes (code, platform, user_id, role, created_at, expires_at)"
        " VALUES (?,?,?,?,?,?)",
        (_hash(code), platform, user_id, role, now, now + LINK_TTL),
    )
    return code


def redeem(
    conn: apsw.Connection, code: str, platform: str, user_id: str, role: Role, now: float
) -> Linked | LinkRefused:
    """Link the account that issued `code` with this one (`role`: this one's role now).

    Both accounts end up one person: a new one, the person either already is,
    or, when each already is a different one, the issuer's, which takes in every
    account of the other. The code is used up by any account but its issuer that
    sends it (a link, or a refusal: another account on the issuer's platform, an owner
    with a user): whoever else saw it cannot try it again.
    """
    conn.execute("DELETE FROM link_codes WHERE expires_at <= ?", (now,))
    key = _hash(code)
    row = conn.execute(
        "SELECT platform, user_id, role FROM link_codes WHERE code = ? AND expires_at > ?",
        (key, now),
    ).fetchone()
    if row is None:
        return LinkRefused(WRONG_CODE)
    issuer = (row[0], row[1])
    if issuer == (platform, user_id):
        return LinkRefused(SAME_ACCOUNT)  # the code stays good for the other account
    conn.execute("DELETE FROM link_codes WHERE code = ?", (key,))  # seen by another: spent
    if issuer[0] == platform:
        return LinkRefused(SAME_PLATFORM)
    if (row[2] == "owner") != (role == "owner"):
        return LinkRefused(OWNER_MISMATCH)
    first, second = person_of(conn, *issuer), person_of(conn, platform, user_id)
    person = first or second or _new_person()
    if first is not None and second is not None and first != second:
        conn.execute("UPDATE identities SET person = ? WHERE person = ?", (first, second))
    for account in (issuer, (platform, user_id)):
        conn.execute(
            "INSERT OR IGNORE INTO identities (platform, user_id, person, linked_at)"
            " VALUES (?,?,?,?)",
            (*account, person, now),
        )
    return Linked(person, accounts_of(conn, person))


def person_of(conn: apsw.Connection, platform: str, user_id: str) -> str | None:
    """The person an account is linked as; None for an account not linked."""
    row = conn.execute(
        "SELECT person FROM identities WHERE platform = ? AND user_id = ?", (platform, user_id)
    ).fetchone()
    return row[0] if row else None


def accounts_of(conn: apsw.Connection, person: str) -> list[tuple[str, str]]:
    """A person's accounts, (platform, user_id), in the order they were linked."""
    rows = conn.execute(
        "SELECT platform, user_id FROM identities WHERE person = ?"
        " ORDER BY linked_at, platform, user_id",
        (person,),
    )
    return [(p, u) for p, u in rows]


def unlink(conn: apsw.Connection, platform: str, user_id: str) -> bool:
    """Take an account out of its person; False if it was not linked. The last account
    left goes too: a lone account is not linked."""
    person = person_of(conn, platform, user_id)
    if person is None:
        return False
    conn.execute("DELETE FROM identities WHERE platform = ? AND user_id = ?", (platform, user_id))
    left = conn.execute("SELECT count(*) FROM identities WHERE person = ?", (person,)).get
    if left < 2:
        conn.execute("DELETE FROM identities WHERE person = ?", (person,))
    return True


def list_identities(conn: apsw.Connection) -> list[Identity]:
    """Every linked account, by person, each person's in the order they were linked."""
    rows = conn.execute(
        "SELECT person, platform, user_id, linked_at FROM identities"
        " ORDER BY person, linked_at, platform, user_id"
    )
    return [Identity(person, p, u, at) for person, p, u, at in rows]


def latest_session(conn: apsw.Connection, accounts: list[tuple[str, str]]) -> str | None:
    """The session last active among those not ended that any of `accounts` started (a
    session's `source` is its platform). What `/continue` takes up."""
    if not accounts:
        return None
    pairs = ", ".join("(?, ?)" for _ in accounts)
    args: list[str] = [value for account in accounts for value in account]
    row = conn.execute(
        f"SELECT id FROM sessions WHERE ended_at IS NULL AND (source, user_id) IN"
        f" (VALUES {pairs})"
        " ORDER BY COALESCE(last_activity_at, started_at) DESC, started_at DESC, id LIMIT 1",
        args,
    ).fetchone()
    return row[0] if row else None


def attached_for(conn: apsw.Connection, session_key: str, person: str) -> str | None:
    """The session the chat is attached to, while it is one of `person`'s accounts'
    (an unlink, or a link undone, leaves the chat to its own sessions at once)."""
    session_id = attached(conn, session_key)
    if session_id is None:
        return None
    row = conn.execute("SELECT source, user_id FROM sessions WHERE id = ?", (session_id,))
    found = row.fetchone()
    return session_id if found is not None and tuple(found) in accounts_of(conn, person) else None


def attach(conn: apsw.Connection, session_key: str, session_id: str, now: float) -> None:
    """The chat `session_key` talks in session `session_id` (of another chat) from now on,
    in place of any session it was attached to."""
    conn.execute(
        "INSERT OR REPLACE INTO attached_sessions (session_key, session_id, attached_at)"
        " VALUES (?,?,?)",
        (session_key, session_id, now),
    )


def detach(conn: apsw.Connection, session_key: str) -> None:
    """The chat goes back to its own sessions."""
    conn.execute("DELETE FROM attached_sessions WHERE session_key = ?", (session_key,))


def attached(conn: apsw.Connection, session_key: str) -> str | None:
    """The session the chat is attached to, while that session has not ended: an ended
    one (by /new in either chat, or expiry) leaves the chat to its own again."""
    row = conn.execute(
        "SELECT a.session_id FROM attached_sessions a JOIN sessions s ON s.id = a.session_id"
        " WHERE a.session_key = ? AND s.ended_at IS NULL",
        (session_key,),
    ).fetchone()
    return row[0] if row else None
