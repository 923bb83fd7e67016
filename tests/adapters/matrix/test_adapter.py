"""The Matrix adapter in this process against the fake homeserver (unencrypted rooms):
what a sync brings is admitted, its token kept with the last admission; invites from
allowed users are joined; a send's transaction id makes a resend the same event."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from hermes.actors.clock import Clock
from hermes.adapters.base import FATAL
from hermes.adapters.contract import SendRequest, Sent, Target
from hermes.adapters.cursors import Cursors
from hermes.adapters.matrix.adapter import MatrixAdapter
from hermes.adapters.matrix.config import MatrixConfig
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.serving import in_thread
from tests.fakes.matrix import ALICE, BOB, HERMES, HERMES_TOKEN, FakeMatrix

TOKEN_VAR = "MATRIX_TOKEN"


@pytest.fixture
def hs() -> Iterator[FakeMatrix]:
    with FakeMatrix() as fake:
        yield fake


@asynccontextmanager
async def matrix(
    hs: FakeMatrix, admissions: Admissions, registry=None, state_db=None, token=HERMES_TOKEN
) -> AsyncIterator[Running]:
    config = MatrixConfig(token_env=TOKEN_VAR, base_url=hs.url, user_id=HERMES,
                          allowed_users=(ALICE,), sync_timeout=1.0)  # fmt: skip
    kept = None if registry is None else (lambda: Cursors(registry, state_db, Clock()))
    secrets = Secrets({TOKEN_VAR: token}, frozenset())
    async with running(MatrixAdapter, "matrix", config, secrets, admissions, cursors=kept) as run:
        yield run


@pytest.mark.timeout(30)
async def test_a_dm_is_admitted_and_answered_once_per_transaction(hs):
    room = hs.create_room([ALICE, HERMES], direct=True)
    said = hs.message(room, ALICE, "hello hermes")
    admissions = Admissions()
    async with matrix(hs, admissions) as run:
        await admissions.wait_for(said["event_id"])
        [event] = [e for e in admissions.events if e.event_id == said["event_id"]]
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
    chatter = hs.message(room, BOB, "lunch?")
    asked = hs.message(room, ALICE, "hermes, what is on today?", mentions=[HERMES])
    admissions = Admissions()
    async with matrix(hs, admissions):
        await admissions.wait_for(chatter["event_id"], asked["event_id"])
    by_id = {e.event_id: e for e in admissions.events}
    assert by_id[chatter["event_id"]].mentioned is False
    assert by_id[asked["event_id"]].mentioned is True
    assert by_id[asked["event_id"]].chat_type == "group"


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
async def test_an_admission_that_failed_comes_again(hs, registry, tmp_path):
    """An admission that failed leaves the kept token where it was: the batch comes
    again after the restart."""
    room = hs.create_room([ALICE, HERMES], direct=True)
    doomed = hs.message(room, ALICE, "doomed")
    admissions = Admissions()
    admissions.hold("doomed")
    async with matrix(hs, admissions, registry, tmp_path / "state.db") as run:
        await admissions.wait_for(doomed["event_id"])
        admissions.fail("doomed")  # the journal could not take it: the connection crashes
        await admissions.wait_for(doomed["event_id"], times=2, timeout=20.0)
        assert run.restarts == 1


@pytest.mark.timeout(30)
async def test_a_refused_token_is_fatal(hs):
    async with matrix(hs, Admissions(), token="syt_not_a_token") as run:
        await run.status.reach(FATAL)
        assert "refused the token" in run.status.reason
