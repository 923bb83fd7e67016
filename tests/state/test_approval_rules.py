"""The two rules of approval requests that keep a guarded command from running unasked, on
a real state.db: an owner's "always" holds for that command in that directory in that
session only, and a decision that comes after the request's deadline finds it expired
(and leaves it so), never approved."""

from __future__ import annotations

from hermes.state.approvals import (
    ALWAYS,
    APPROVED,
    EXPIRED,
    PENDING,
    NewApproval,
    decide,
    get_approval,
    open_approval,
)
from tests.seed import rows, writing

NOW = 1_000_000.0


def asked(session: str, cwd: str = "/srv/app", timeout: float = 300.0) -> NewApproval:
    command = "rm -rf build"
    return NewApproval(session, command, command, cwd, "a recursive delete", "telegram", "7",
                       "7", "Ann", "host:1:nonce", timeout)  # fmt: skip


def test_an_always_holds_only_in_the_session_it_was_given_in(db_path):
    with writing(db_path) as conn:
        first = open_approval(conn, asked("s-ann"), NOW)
        given, decided = decide(conn, first.id, True, "Ann", NOW + 1, always=True)
        assert decided and (given.state, given.always) == (APPROVED, True)
        same = open_approval(conn, asked("s-ann"), NOW + 2)
        other_session = open_approval(conn, asked("s-bob"), NOW + 3)
        other_directory = open_approval(conn, asked("s-ann", cwd="/"), NOW + 4)
    assert (same.state, same.decided_by) == (APPROVED, f"{ALWAYS} (Ann)")
    assert (other_session.state, other_session.decided_by) == (PENDING, None)
    assert (other_directory.state, other_directory.decided_by) == (PENDING, None)
    states = rows(db_path, "SELECT session_id, cwd, state FROM approvals ORDER BY created_at")
    assert states == [("s-ann", "/srv/app", APPROVED), ("s-ann", "/srv/app", APPROVED),
                      ("s-bob", "/srv/app", PENDING), ("s-ann", "/", PENDING)]  # fmt: skip


def test_a_decision_after_the_deadline_finds_the_request_expired_never_approved(db_path):
    with writing(db_path) as conn:
        late = open_approval(conn, asked("s-ann", timeout=60), NOW)
        in_time = open_approval(conn, asked("s-ann", timeout=60), NOW)
        taken, took = decide(conn, in_time.id, True, "Ann", NOW + 59)
        found, decided = decide(conn, late.id, True, "Ann", NOW + 61, always=True)
        again, decided_again = decide(conn, late.id, True, "Ann", NOW + 62)
        after = open_approval(conn, asked("s-ann"), NOW + 63)  # no "always" came of it
        kept = get_approval(conn, late.id)
    assert (found.state, decided) == (EXPIRED, False)
    assert (again.state, decided_again) == (EXPIRED, False)
    assert (kept.state, kept.always, kept.decided_by) == (EXPIRED, False, None)
    assert (taken.state, took) == (APPROVED, True)  # the same decision in time is taken
    assert after.state == PENDING
