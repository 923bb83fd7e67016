"""The Matrix adapter in this process against the fake homeserver: what a sync brings
after the first is admitted, its token kept with the last admission; a cut timeline is
filled; invites from allowed users are joined (a stranger's DM where pairing is
offered); a send's transaction id makes a resend the same event; in encrypted rooms,
verified_only keeps the room key from devices not listed, and a changed pickle key is
fatal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from hermes.actors.clock import Clock
from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal
from hermes.adapters.contract import SendRequest, Sent, Target
from hermes.adapters.cursors import Cursors
from hermes.adapters.matrix.adapter import MatrixAdapter
from hermes.adapters.matrix.config import MatrixConfig
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.matrix.serving import PICKLE_KEY, PICKLE_VAR
from tests.adapters.serving import in_thread
from tests.fakes.matrix import (
    ALICE,
    BOB,
    BOB_DEVICE,
    BOB_TOKEN,
    HERMES,
    HERMES_TOKEN,
    PASSWORD,
    FakeMatrix,
)
from tests.fakes.matrix_client import ElementClient

TOKEN_VAR = "MATRIX_TOKEN"


@asynccontextmanager
async def matrix(
    hs: FakeMatrix,
    admissions: Admissions,
    registry=None,
    state_db=None,
    token=HERMES_TOKEN,
    password: str | None = None,
    allowed: tuple[str, ...] = (ALICE,),
    **settings: Any,
) -> AsyncIterator[Running]:
    """The adapter on the fake with its token (or, given a `password`, with that to log in);
    `settings`: more of its config (`pickle_key_env=PICKLE_VAR` for encrypted rooms)."""
    login = {"password_env": "MATRIX_PASSWORD"} if password else {"token_env": TOKEN_VAR}
    config = MatrixConfig(base_url=hs.url, user_id=HERMES, allowed_users=allowed,
                          sync_timeout=1.0, **login, **settings)  # fmt: skip
    kept = None if registry is None else (lambda: Cursors(registry, state_db, Clock()))
    secrets = Secrets({TOKEN_VAR: token, "MATRIX_PASSWORD": password or "",
                       PICKLE_VAR: PICKLE_KEY, "MATRIX_OTHER_KEY": "not the key"},
                      frozenset())  # fmt: skip
    async with running(MatrixAdapter, "matrix", config, secrets, admissions, cursors=kept) as run:
        yield run


async def begun(hs: FakeMatrix, before: int = 0) -> None:
    """Until this start's first sync was answered (`before`: hermes's syncs of earlier
    starts): what comes later is new to it."""
    await in_thread(lambda: hs.wait_syncs(before + 2, user=HERMES))  # the next one is held


@pytest.mark.timeout(30)
async def test_history_before_the_first_sync_is_not_answered(hs):
    room = hs.create_room([ALICE, HERMES], direct=True)
    old = hs.message(room, ALICE, "from last year")
    admissions = Admissions()
    async with matrix(hs, admissions):
        await begun(hs)
        said = hs.message(room, ALICE, "and now")
        await admissions.wait_for(said["event_id"])
    assert old["event_id"] not in admissions.ids


@pytest.mark.timeout(30)
async def test_a_dm_is_admitted_and_answered_once_per_transaction(hs):
    room = hs.create_room([ALICE, HERMES], direct=True)
    admissions = Admissions()
    async with matrix(hs, admissions) as run:
        await begun(hs)
        said = hs.message(room, ALICE, "hello hermes")
        await admissions.wait_for(said["event_id"])
        event = admissions.event(said["event_id"])
        assert (event.chat_id, event.user_id, event.text) == (room, ALICE, "hello hermes")
        assert event.chat_type == "dm" and event.mentioned
        request = SendRequest(Target("matrix", room), "hello Alice", "reply:1:0")
        first = await run.send(request)
        again = await run.send(request)  # its answer was lost: sent again, the same event
        assert isinstance(first, Sent) and again == first
    assert [s["content"]["body"] for s in hs.sent] == ["hello Alice"]


@pytest.mark.timeout(30)
async def test_in_a_group_only_a_mention_is_addressed(hs):
    room = hs.create_room([ALICE, BOB, HERMES], name="team")
    admissions = Admissions()
    async with matrix(hs, admissions):
        await begun(hs)
        chatter = hs.message(room, BOB, "lunch?")
        asked = hs.message(room, ALICE, "hermes, what is on today?", mentions=[HERMES])
        await admissions.wait_for(chatter["event_id"], asked["event_id"])
    assert admissions.event(chatter["event_id"]).mentioned is False
    assert admissions.event(asked["event_id"]).mentioned is True
    assert admissions.event(asked["event_id"]).chat_type == "group"


@pytest.mark.timeout(30)
async def test_an_allowed_users_invite_is_joined_and_a_strangers_is_not(hs):
    mine = hs.create_room([ALICE], invite=[HERMES])
    theirs = hs.create_room([BOB], invite=[HERMES])
    admissions = Admissions()
    async with matrix(hs, admissions):
        await in_thread(hs.wait_until, lambda f: HERMES in f.members(mine), 10.0, "a join")
        said = hs.message(mine, ALICE, "welcome")
        await admissions.wait_for(said["event_id"])
    assert HERMES not in hs.members(theirs) and HERMES in hs.members(theirs, "invite")


@pytest.mark.timeout(30)
async def test_where_pairing_is_offered_a_strangers_dm_invite_is_joined_and_a_group_not(hs):
    dm = hs.create_room([BOB], invite=[HERMES], direct=True)
    group = hs.create_room([BOB], invite=[HERMES], name="Spam")
    admissions = Admissions()
    async with matrix(hs, admissions, allowed=()):
        await in_thread(hs.wait_until, lambda f: HERMES in f.members(dm), 10.0, "a join")
        said = hs.message(dm, BOB, "let me in")
        await admissions.wait_for(said["event_id"])  # the router answers a pairing code
    assert admissions.event(said["event_id"]).chat_type == "dm"
    assert HERMES not in hs.members(group) and HERMES in hs.members(group, "invite")


@pytest.mark.timeout(30)
async def test_an_admission_that_failed_comes_again(hs, registry, tmp_path):
    """An admission that failed leaves the kept token where it was: the batch comes
    again after the restart."""
    room = hs.create_room([ALICE, HERMES], direct=True)
    admissions = Admissions()
    admissions.hold("doomed")
    async with matrix(hs, admissions, registry, tmp_path / "state.db") as run:
        await begun(hs)
        doomed = hs.message(room, ALICE, "doomed")
        await admissions.wait_for(doomed["event_id"])
        admissions.fail("doomed")  # the journal could not take it: the connection crashes
        await admissions.wait_for(doomed["event_id"], times=2, timeout=20.0)
        assert run.restarts == 1


@pytest.mark.timeout(30)
async def test_a_refused_token_is_fatal(hs):
    async with matrix(hs, Admissions(), token="syt_not_a_token") as run:
        await run.status.reach(FATAL)
        assert "refused the token" in run.status.reason


@pytest.mark.timeout(30)
async def test_a_cut_timeline_is_filled_from_messages_in_order(hs):
    room = hs.create_room([ALICE, HERMES], direct=True)
    admissions = Admissions()
    async with matrix(hs, admissions):
        await begun(hs)
        hs.hang_syncs()  # hermes is away while a burst comes
        await in_thread(hs.wait_held_syncs)
        hs.limit_timeline(room, 2)
        said = [hs.message(room, ALICE, f"message {n}")["event_id"] for n in range(6)]
        hs.unhang_syncs()
        await admissions.wait_for(*said)
    assert [i for i in admissions.ids if i in said] == said  # each once, oldest first
    assert any(r["endpoint"].endswith("messages") for r in hs.requests)


@pytest.mark.timeout(30)
async def test_a_rate_limited_sync_waits_as_long_as_it_was_told(hs):
    room = hs.create_room([ALICE, HERMES], direct=True)
    admissions = Admissions()
    async with matrix(hs, admissions) as run:
        await begun(hs)
        hs.fail(429, endpoint="sync", retry_after_ms=300)
        first = hs.message(room, ALICE, "before")  # the held sync answers; the next is refused
        await admissions.wait_for(first["event_id"])
        [refused] = await in_thread(hs.wait_refused, 1)
        assert (refused["endpoint"], refused["status"]) == ("sync", 429)
        said = hs.message(room, ALICE, "after the wait")
        await admissions.wait_for(said["event_id"])
        assert run.restarts == 0  # a wait, not a crash


@pytest.mark.timeout(30)
async def test_a_password_logs_in_once_and_the_login_is_kept(hs, registry, tmp_path):
    room = hs.create_room([ALICE, HERMES], direct=True)
    for n in range(2):  # two starts: the second uses the kept login
        before = len([s for s in hs.syncs if s["user"] == HERMES])
        admissions = Admissions()
        async with matrix(hs, admissions, registry, tmp_path / "state.db", password=PASSWORD):
            await begun(hs, before)
            said = hs.message(room, ALICE, f"start {n}")
            await admissions.wait_for(said["event_id"])
    logins = [r for r in hs.requests if r["endpoint"] == "login"]
    assert len(logins) == 1 and PASSWORD not in str(hs.requests[-1])


@pytest.mark.timeout(30)
async def test_verified_only_gives_the_room_key_to_the_listed_devices_only(
    hs, alice, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES, BOB], name="Verified", encrypted=True)
    with ElementClient(hs.url, BOB, BOB_TOKEN, BOB_DEVICE) as bob:
        await in_thread(bob.start)
        settings = {"pickle_key_env": PICKLE_VAR, "trust": "verified_only",
                    "verified_devices": (alice.ed25519,)}  # fmt: skip
        async with matrix(hs, Admissions(), registry, tmp_path / "state.db", **settings) as run:
            await begun(hs)
            sent = await run.send(SendRequest(Target("matrix", room), "for Alice", "k1"))
            assert isinstance(sent, Sent)
        [read] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
        assert read.content["body"] == "for Alice"
        await in_thread(bob.sync)
        assert [e["event_id"] for e in bob.undecrypted] == [sent.message_id]


@pytest.mark.timeout(30)
async def test_another_pickle_key_is_fatal_and_says_why(hs, registry, tmp_path):
    state_db = tmp_path / "state.db"
    async with matrix(hs, Admissions(), registry, state_db, pickle_key_env=PICKLE_VAR):
        await begun(hs)
    secrets_changed = {"pickle_key_env": "MATRIX_OTHER_KEY"}
    async with matrix(hs, Admissions(), registry, state_db, **secrets_changed) as run:
        await run.status.reach(FATAL)
        assert "does not open with this pickle key" in run.status.reason


async def test_doctors_check_reads_the_tokens_account_and_never_logs_in(hs):
    config = MatrixConfig(base_url=hs.url, user_id=HERMES, token_env=TOKEN_VAR)
    said = await MatrixAdapter.check_token(config, Secrets({TOKEN_VAR: HERMES_TOKEN}, frozenset()))
    assert said == f"{HERMES} (device HERMESDEV)"
    with pytest.raises(AdapterFatal, match="refused the token"):
        await MatrixAdapter.check_token(config, Secrets({TOKEN_VAR: "syt_wrong"}, frozenset()))
    by_password = MatrixConfig(base_url=hs.url, user_id=HERMES, password_env="MATRIX_PASSWORD")
    secrets = Secrets({"MATRIX_PASSWORD": PASSWORD}, frozenset())
    assert "logs in with its password" in await MatrixAdapter.check_token(by_password, secrets)
    assert not [r for r in hs.requests if r["endpoint"] == "login"]
