"""DM pairing on a real state.db: codes, expiry, one reply an hour, eviction, approval,
owners, revocation, lockout, and `hermes pairing ...`."""

from __future__ import annotations

import time

import apsw
import pytest

from hermes.cli import exit_codes
from hermes.cli.main import main
from hermes.operations.pairing import PairingLocked, PairingRefused, approve_code
from hermes.state.db import Db
from hermes.state.pairing import (
    ALPHABET,
    approved_users,
    deny_request,
    new_code,
    owners,
    pending,
    request_code,
    revoke,
)
from tests.seed import writing

T0 = 1_800_000_000.0
HOUR = 3600.0


@pytest.fixture
async def db(registry, db_path):
    async with Db(registry, db_path) as gen:
        yield gen


async def ask(db, user: str, now: float = T0, platform: str = "telegram"):
    return await db.write(request_code, platform, user, f"name-{user}", now)


async def count(db, sql: str) -> int:
    return await db.read(lambda conn: conn.execute(sql).get)


def test_codes_are_eight_unambiguous_characters():
    assert not set("0O1I") & set(ALPHABET)
    codes = [new_code() for _ in range(200)]
    for code in codes:
        assert len(code) == 8 and set(code) <= set(ALPHABET), code
    assert len(set(codes)) > 195  # random, not a counter or a constant


async def test_a_request_gets_a_code_in_that_format(db):
    offer = await ask(db, "42")
    assert len(offer.code) == 8 and set(offer.code) <= set(ALPHABET)
    assert (offer.quiet, offer.already_approved, offer.expires_at) == (False, False, T0 + HOUR)
    assert offer.code in offer.message(T0) and "60 min" in offer.message(T0)


async def test_the_code_is_stored_only_hashed(db, db_path):
    offer = await ask(db, "42")

    def everything(conn) -> list[str]:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [repr(row) for t in tables for row in conn.execute(f"SELECT * FROM [{t}]")]

    rows = await db.read(everything)
    assert any("42" in row and offer.code[:2] in row for row in rows)  # the request is there
    assert not any(offer.code in row for row in rows)
    for path in (db_path, db_path.with_name("state.db-wal")):
        if path.exists():
            assert offer.code.encode() not in path.read_bytes()
    hints = await db.read(pending, T0)
    assert [(p.user_id, p.code_hint) for p in hints] == [("42", offer.code[:2])]


async def test_a_code_is_valid_for_one_hour(db):
    early = await ask(db, "1")
    late = await ask(db, "2")
    assert (await approve_code(db, "telegram", early.code, T0 + HOUR - 1)).user_id == "1"
    with pytest.raises(PairingRefused, match="no pending request with that code") as refused:
        await approve_code(db, "telegram", late.code, T0 + HOUR + 1)
    assert not isinstance(refused.value, PairingLocked)
    assert await db.read(approved_users, "telegram") == frozenset({"1"})
    assert await db.read(pending, T0 + HOUR + 1) == []


async def pending_users(db, now: float, platform: str = "telegram") -> list[str]:
    return [p.user_id for p in await db.read(pending, now) if p.platform == platform]


async def test_a_user_who_asks_a_hundred_times_gets_one_reply_an_hour(db):
    replies = [(await ask(db, "42", T0 + i * 30)).message(T0 + i * 30) for i in range(100)]
    assert [bool(text) for text in replies] == [True] + [False] * 99
    first = replies[0]
    assert (
        "pairing code is" in first and await count(db, "SELECT count(*) FROM pairing_requests") == 1
    )
    quiet = await ask(db, "42", T0 + 1800)
    assert (quiet.code, quiet.quiet, quiet.message(T0 + 1800)) == (None, True, "")
    # The hour is up (the code with it): one new code, then quiet again.
    later = [(await ask(db, "42", T0 + HOUR + i)).code for i in range(5)]
    assert later[0] is not None and later[0] not in first and later[1:] == [None] * 4
    assert (await approve_code(db, "telegram", later[0], T0 + HOUR + 10)).user_id == "42"


async def test_a_full_platform_evicts_its_oldest_request(db):
    codes = {user: (await ask(db, user, T0 + i * 60)).code for i, user in enumerate("123")}
    assert all(codes.values())
    fourth = await ask(db, "4", T0 + 200)
    assert fourth.code is not None and "pairing code is" in fourth.message(T0 + 200)
    assert await pending_users(db, T0 + 200) == ["2", "3", "4"]
    assert (await ask(db, "4", T0 + 200, platform="slack")).code  # per platform
    assert await pending_users(db, T0 + 200, "slack") == ["4"]

    with pytest.raises(PairingRefused, match="no pending request with that code"):
        await approve_code(db, "telegram", codes["1"], T0 + 300)  # its code stopped working
    # The evicted user is not told, and writing again within their hour is not answered
    # (no code, no eviction of someone else) ...
    for at in (T0 + 400, T0 + 1800, T0 + HOUR - 1):
        again = await ask(db, "1", at)
        assert (again.code, again.message(at)) == (None, "")
    assert await pending_users(db, T0 + HOUR - 1) == ["2", "3", "4"]
    assert (await approve_code(db, "telegram", codes["2"], T0 + HOUR - 1)).user_id == "2"
    # ... after it, they may ask again.
    assert (await ask(db, "1", T0 + HOUR)).code is not None
    assert await pending_users(db, T0 + HOUR) == ["3", "4", "1"]


async def test_expired_requests_are_dropped_and_new_users_get_codes(db):
    for i, user in enumerate("123"):
        await ask(db, user, T0 + i)
    assert await pending_users(db, T0 + HOUR + 2) == []  # all three expired
    newcomers = [await ask(db, user, T0 + HOUR + 2) for user in "567"]
    assert all(offer.code for offer in newcomers)
    assert await count(db, "SELECT count(*) FROM pairing_requests") == 3  # the old rows gone
    assert await pending_users(db, T0 + HOUR + 2) == ["5", "6", "7"]
    assert (await approve_code(db, "telegram", newcomers[0].code, T0 + HOUR + 3)).user_id == "5"


async def test_a_denied_user_is_not_answered_until_their_hour_is_up(db):
    await ask(db, "42")
    assert await db.write(deny_request, "telegram", "42") is True
    assert (await ask(db, "42", T0 + 60)).message(T0 + 60) == ""
    assert await pending_users(db, T0 + 60) == []
    assert (await ask(db, "42", T0 + HOUR)).code is not None


async def test_approval_lets_the_user_in_and_makes_an_owner_only_when_asked(db):
    alice, bob, carol = await ask(db, "1"), await ask(db, "2"), await ask(db, "3")
    first = await approve_code(db, "telegram", alice.code.lower(), T0 + 60)  # typed in lower case
    assert (first.user_id, first.user_name, first.owner) == ("1", "name-1", False)  # not implied
    assert await db.read(approved_users, "telegram") == frozenset({"1"})
    second = await approve_code(db, "telegram", bob.code, T0 + 120, owner=True)
    assert (second.user_id, second.owner) == ("2", True)
    third = await approve_code(db, "telegram", carol.code, T0 + 150)
    assert (third.user_id, third.owner) == ("3", False)
    assert await db.read(approved_users, "telegram") == frozenset({"1", "2", "3"})
    assert await db.read(owners, "telegram") == frozenset({"2"})
    assert await db.read(pending, T0 + 150) == []
    assert (await ask(db, "1", T0 + 180)).already_approved
    with pytest.raises(PairingRefused):  # a code approves once
        await approve_code(db, "telegram", alice.code, T0 + 240)


async def test_a_code_approves_only_on_its_platform(db):
    offer = await ask(db, "1")
    with pytest.raises(PairingRefused, match="on slack"):
        await approve_code(db, "slack", offer.code, T0 + 60)
    assert await db.read(approved_users, "slack") == frozenset()


async def test_revoke(db):
    offer = await ask(db, "1")
    await approve_code(db, "telegram", offer.code, T0 + 60)
    assert await db.write(revoke, "telegram", "1") is True
    assert await db.read(approved_users, "telegram") == frozenset()
    assert await db.write(revoke, "telegram", "1") is False
    assert (await ask(db, "1", T0 + 120)).code is not None  # a stranger again


async def test_five_failures_lock_approvals_for_an_hour(db):
    for i in range(5):
        with pytest.raises(PairingRefused) as refused:
            await approve_code(db, "telegram", "WRONGCDE", T0 + i)
        assert not isinstance(refused.value, PairingLocked)
    offer = await ask(db, "42", T0 + 1800)  # valid until T0 + 5400
    with pytest.raises(PairingLocked, match="locked until") as locked:
        await approve_code(db, "telegram", offer.code, T0 + 1801)  # a valid code, refused
    assert locked.value.until == T0 + 4 + HOUR
    with pytest.raises(PairingLocked):  # guessing on while locked does not stretch the lock
        await approve_code(db, "telegram", "WRONGCDE", T0 + 3000)
    other = await ask(db, "7", T0 + 1900, platform="slack")
    assert (await approve_code(db, "slack", other.code, T0 + 1901)).user_id == "7"  # per platform
    assert await db.read(approved_users, "telegram") == frozenset()
    assert (await approve_code(db, "telegram", offer.code, T0 + 4 + HOUR)).user_id == "42"


async def test_failures_spread_over_more_than_an_hour_do_not_lock(db):
    for at in (T0, T0 + 1, T0 + 2, T0 + 3, T0 + HOUR + 1):
        with pytest.raises(PairingRefused) as refused:
            await approve_code(db, "telegram", "WRONGCDE", at)
        assert not isinstance(refused.value, PairingLocked)
    offer = await ask(db, "42", T0 + HOUR + 2)
    assert (await approve_code(db, "telegram", offer.code, T0 + HOUR + 3)).user_id == "42"


# -- hermes pairing ... ---------------------------------------------------------------


def run_cli(*argv: str) -> int:
    return main(["pairing", *argv])


def ask_now(home, user: str, name: str | None) -> str:
    with writing(home.state_db) as conn:
        return request_code(conn, "telegram", user, name, time.time()).code


def test_cli_list_on_a_fresh_home_creates_nothing(home, capsys):
    assert run_cli("list") == exit_codes.OK
    assert capsys.readouterr().out == "no pending pairing requests\n"
    assert not home.state_db.exists()


def test_cli_list_shows_pending_requests(home, capsys):
    code = ask_now(home, "12345", "alice")
    assert run_cli("list") == exit_codes.OK
    out = capsys.readouterr().out
    assert "12345" in out and "alice" in out and "telegram" in out
    assert f"{code[:2]}******" in out and code not in out


def test_cli_approve_and_revoke(home, capsys):
    alice, bob = ask_now(home, "12345", "alice"), ask_now(home, "678", None)
    assert run_cli("approve", "telegram", alice, "--owner") == exit_codes.OK
    assert capsys.readouterr().out == (
        "approved telegram user 12345 (alice); they are an owner of telegram\n"
    )
    assert run_cli("approve", "telegram", bob) == exit_codes.OK
    assert capsys.readouterr().out == (
        "approved telegram user 678; they can talk to the agent now\n"
    )
    assert run_cli("list") == exit_codes.OK
    assert capsys.readouterr().out == "no pending pairing requests\n"
    assert run_cli("revoke", "telegram", "678") == exit_codes.OK
    assert "revoked telegram user 678" in capsys.readouterr().out
    assert run_cli("revoke", "telegram", "678") == exit_codes.FAILED
    assert "not approved by pairing" in capsys.readouterr().err


def test_cli_approves_by_code_only(home, capsys):
    """Not by the user id picked from the list, where a stranger's chosen name stands."""
    ask_now(home, "12345", "alice")
    with pytest.raises(SystemExit):
        run_cli("approve", "telegram", "--user", "12345")
    assert "unrecognized arguments: --user" in capsys.readouterr().err


def test_cli_wrong_code_is_one_line_on_stderr(home, capsys):
    ask_now(home, "12345", "alice")
    assert run_cli("approve", "telegram", "WRONGCDE") == exit_codes.FAILED
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("hermes: no pending request with that code")
    assert captured.err.count("\n") == 1


def test_cli_list_on_a_state_db_without_tables(home, capsys):
    """A read-only list cannot migrate: a file without the pairing tables has none pending."""
    apsw.Connection(str(home.state_db)).close()  # the file exists, empty
    assert run_cli("list") == exit_codes.OK
    assert capsys.readouterr().out == "no pending pairing requests\n"
