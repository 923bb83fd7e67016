"""Linked accounts on a real state.db: codes, refusals, one-time use, merging persons,
unlinking, the session `/continue` takes up, and attached sessions."""

from __future__ import annotations

import pytest

from hermes.state.db import Db
from hermes.state.identities import (
    LINK_TTL,
    OWNER_MISMATCH,
    SAME_ACCOUNT,
    SAME_PLATFORM,
    WRONG_CODE,
    Identity,
    Linked,
    LinkRefused,
    accounts_of,
    attach,
    attached,
    attached_for,
    detach,
    issue_code,
    latest_session,
    list_identities,
    person_of,
    redeem,
    unlink,
)
from hermes.state.pairing import ALPHABET
from hermes.state.sessions import NewSession, create_session, end_session
from tests.seed import rows

T0 = 1_800_000_000.0
TG, DC, SL = ("telegram", "1"), ("discord", "2"), ("slack", "3")


@pytest.fixture
async def db(registry, db_path):
    async with Db(registry, db_path) as gen:
        yield gen


async def link(db, issuer, redeemer, now: float = T0, roles=("user", "user")):
    code = await db.write(issue_code, *issuer, roles[0], now)
    return await db.write(redeem, code, *redeemer, roles[1], now + 1)


async def test_issue_and_redeem_link_two_accounts(db, db_path):
    code = await db.write(issue_code, *TG, "user", T0)
    assert len(code) == 8 and set(code) <= set(ALPHABET)
    assert code not in str(rows(db_path, "SELECT * FROM link_codes"))  # only its hash

    linked = await db.write(redeem, code.lower(), *DC, "user", T0 + 5)
    assert isinstance(linked, Linked)
    assert linked.person.startswith("p_") and len(linked.person) == 14
    assert sorted(linked.accounts) == sorted([TG, DC])
    assert await db.read(person_of, *TG) == await db.read(person_of, *DC) == linked.person
    assert await db.read(accounts_of, linked.person) == linked.accounts
    assert await db.read(list_identities) == [
        Identity(linked.person, *account, T0 + 5) for account in linked.accounts
    ]
    assert await db.read(person_of, *SL) is None


async def test_a_wrong_or_expired_code_is_refused(db):
    assert await db.write(redeem, "ABCDEFGH", *DC, "user", T0) == LinkRefused(WRONG_CODE)
    code = await db.write(issue_code, *TG, "user", T0)
    late = await db.write(redeem, code, *DC, "user", T0 + LINK_TTL)
    assert late == LinkRefused(WRONG_CODE)
    assert "/link" in late.reason
    assert await db.read(list_identities) == []


async def test_a_new_code_replaces_the_accounts_earlier_one(db):
    first = await db.write(issue_code, *TG, "user", T0)
    second = await db.write(issue_code, *TG, "user", T0 + 1)
    assert await db.write(redeem, first, *DC, "user", T0 + 2) == LinkRefused(WRONG_CODE)
    assert isinstance(await db.write(redeem, second, *DC, "user", T0 + 2), Linked)


async def test_expired_codes_are_pruned_when_a_code_is_issued(db, db_path):
    await db.write(issue_code, *TG, "user", T0)
    await db.write(issue_code, *DC, "user", T0 + LINK_TTL + 1)
    assert rows(db_path, "SELECT platform FROM link_codes") == [("discord",)]


async def test_the_account_that_issued_the_code_is_refused(db):
    code = await db.write(issue_code, *TG, "user", T0)
    assert await db.write(redeem, code, *TG, "user", T0 + 1) == LinkRefused(SAME_ACCOUNT)
    assert "other account" in SAME_ACCOUNT
    # The code stays good for the account it was meant for.
    assert isinstance(await db.write(redeem, code, *DC, "user", T0 + 2), Linked)


@pytest.mark.parametrize("roles", [("owner", "user"), ("user", "owner")])
async def test_an_owner_links_only_with_an_owner(db, roles):
    assert await link(db, TG, DC, roles=roles) == LinkRefused(OWNER_MISMATCH)
    assert "owner on both" in OWNER_MISMATCH
    assert await db.read(list_identities) == []
    assert isinstance(await link(db, TG, DC, roles=("owner", "owner")), Linked)


async def test_a_code_another_account_sent_is_spent_whatever_came_of_it(db):
    """Whoever else saw a code (pasted in a group, say) cannot try it again."""
    code = await db.write(issue_code, *TG, "user", T0)
    same_platform = await db.write(redeem, code, "telegram", "9", "user", T0 + 1)
    assert same_platform == LinkRefused(SAME_PLATFORM)
    assert await db.write(redeem, code, *DC, "user", T0 + 2) == LinkRefused(WRONG_CODE)
    code = await db.write(issue_code, *TG, "user", T0 + 3)
    assert await db.write(redeem, code, *DC, "owner", T0 + 4) == LinkRefused(OWNER_MISMATCH)
    assert await db.write(redeem, code, *SL, "user", T0 + 5) == LinkRefused(WRONG_CODE)
    assert await db.read(list_identities) == []


async def test_an_attachment_holds_only_while_its_session_is_the_persons(db):
    person = (await link(db, TG, DC)).person
    await session(db, "tg-1", TG, T0)
    await db.write(attach, "discord:dm:2", "tg-1", T0 + 2)
    assert await db.read(attached_for, "discord:dm:2", person) == "tg-1"
    await db.write(unlink, *DC)  # TG is alone now: the person is gone
    assert await db.read(attached_for, "discord:dm:2", person) is None


async def test_a_code_links_once(db):
    code = await db.write(issue_code, *TG, "user", T0)
    assert isinstance(await db.write(redeem, code, *DC, "user", T0 + 1), Linked)
    assert await db.write(redeem, code, *SL, "user", T0 + 2) == LinkRefused(WRONG_CODE)
    assert await db.read(person_of, *SL) is None


async def test_a_third_account_joins_the_person(db):
    first = await link(db, TG, DC)
    third = await link(db, SL, DC, T0 + 10)  # the new account issues, a linked one redeems
    assert third.person == first.person
    assert third.accounts == [*first.accounts, SL]


async def test_linking_two_persons_merges_them(db):
    ab = await link(db, TG, DC)
    cd = await link(db, SL, ("matrix", "4"), T0 + 10)
    assert ab.person != cd.person
    merged = await link(db, TG, SL, T0 + 20)  # the issuer's person takes in the other's
    assert merged.person == ab.person
    assert sorted(merged.accounts) == sorted([TG, DC, SL, ("matrix", "4")])
    assert {i.person for i in await db.read(list_identities)} == {ab.person}
    assert await db.read(accounts_of, cd.person) == []


async def test_unlink_leaves_a_lone_account_unlinked(db):
    person = (await link(db, TG, DC)).person
    await link(db, SL, TG, T0 + 10)
    assert await db.write(unlink, *SL) is True
    assert await db.read(accounts_of, person) == [DC, TG]  # linked at once: by platform
    assert await db.write(unlink, *TG) is True
    assert await db.read(person_of, *DC) is None  # alone: not linked any more
    assert await db.read(list_identities) == []
    assert await db.write(unlink, *DC) is False


async def session(db, sid: str, account, started: float, key: str | None = None) -> None:
    platform, user = account
    new = NewSession(sid, source=platform, session_key=key or f"{platform}:{sid}",
                     user_id=user, started_at=started)  # fmt: skip
    await db.write(create_session, new)


async def test_latest_session_is_the_persons_newest_across_platforms(db):
    await session(db, "tg-old", TG, T0)
    await session(db, "dc-new", DC, T0 + 50)
    await session(db, "dc-ended", DC, T0 + 60)
    await db.write(end_session, "dc-ended", "new", T0 + 61)
    await session(db, "sl-other", SL, T0 + 70)  # not one of the accounts
    await session(db, "tg-same-user-other-platform", ("discord", "1"), T0 + 80)
    mine = [TG, DC]
    assert await db.read(latest_session, mine) == "dc-new"
    # Activity counts, not only the start.
    await db.write(lambda conn: conn.execute(
        "UPDATE sessions SET last_activity_at = ? WHERE id = 'tg-old'", (T0 + 90,)))  # fmt: skip
    assert await db.read(latest_session, mine) == "tg-old"
    assert await db.read(latest_session, [SL, ("matrix", "9")]) == "sl-other"
    assert await db.read(latest_session, [("matrix", "9")]) is None
    assert await db.read(latest_session, []) is None


async def test_attached_ignores_an_ended_session(db):
    await session(db, "tg-1", TG, T0)
    await session(db, "tg-2", TG, T0 + 1)
    here = "discord:dm:2"
    assert await db.read(attached, here) is None
    await db.write(attach, here, "tg-1", T0 + 2)
    assert await db.read(attached, here) == "tg-1"
    await db.write(attach, here, "tg-2", T0 + 3)  # attached elsewhere: in its place
    assert await db.read(attached, here) == "tg-2"
    await db.write(end_session, "tg-2", "new", T0 + 4)
    assert await db.read(attached, here) is None
    await db.write(attach, here, "tg-1", T0 + 5)
    await db.write(detach, here)
    assert await db.read(attached, here) is None
    await db.write(detach, here)  # detaching twice is no error
