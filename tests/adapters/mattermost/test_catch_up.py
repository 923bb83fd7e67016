"""Mattermost's catch-up in this process against the fake: a channel's start per channel
(a mention made before the bot joined is not for it), capped at the server's time, a
full since-answer read by pages, and a channel the server will not read skipped (the
others are read, and it is tried at the next catch-up). The starts live in the
adapter's memory here (the admissions are the test's); serve keeps them in state.db."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from hermes.adapters.mattermost.adapter import MattermostAdapter
from hermes.adapters.mattermost.config import MattermostConfig
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.mattermost.serving import TOKEN_VAR
from tests.adapters.serving import in_thread
from tests.fakes.mattermost import BOT_TOKEN, FakeMattermost

pytestmark = pytest.mark.timeout(30)


@asynccontextmanager
async def adapter(fake: FakeMattermost, admissions: Admissions) -> AsyncIterator[Running]:
    """The adapter on the fake, once it reads its socket (a DM it brought was admitted:
    the fake counts a socket authenticated before the adapter reads that it is)."""
    config = MattermostConfig(token_env=TOKEN_VAR, base_url=fake.url, idle_timeout=3)
    secrets = Secrets({TOKEN_VAR: BOT_TOKEN}, frozenset())
    async with running(MattermostAdapter, "mattermost", config, secrets, admissions) as run:
        await in_thread(fake.wait_authenticated, 1)
        await admissions.wait_for(fake.message("hello", user="zed"))
        yield run


def last_in(fake: FakeMattermost, channel: str) -> str:
    return fake.posts_in(channel)[-1]["id"]


async def test_a_full_since_answer_is_read_by_pages(mattermost):
    admissions = Admissions()
    async with adapter(mattermost, admissions) as run:
        mattermost.since_cap = run.incarnations[-1].since_cap = 3  # the server's is 1000
        mattermost.drop(then=tuple(f"while away {n}" for n in range(5)))
        posted = [p["id"] for p in mattermost.posts_in("dm-ann")]
        await admissions.wait_for(*posted)
        assert admissions.ids[1:] == posted  # oldest first, once each
        assert any("page" in c for c in mattermost.catchups)


async def test_a_post_dated_in_the_future_moves_no_start_past_now(mattermost):
    admissions = Admissions()
    async with adapter(mattermost, admissions):
        later = int(time.time() * 1000) + 3_600_000
        future = mattermost.message("from the future", at=later)
        await admissions.wait_for(future)
        mattermost.drop(then="while the socket was down")
        await admissions.wait_for(last_in(mattermost, "dm-ann"))


async def test_a_mention_made_before_the_bot_joined_is_not_for_it(mattermost):
    admissions = Admissions()
    mattermost.leave_out("secret")
    async with adapter(mattermost, admissions):
        before = int(time.time() * 1000) - 5000  # the server's time is read to the second
        old = mattermost.message("old question", user="bob", channel="secret", kind="O",
                                 mention=True, at=before)  # fmt: skip
        mattermost.join("secret")  # the adapter reconnects to read it
        await in_thread(mattermost.wait_authenticated, 2)
        new = mattermost.message("new question", user="bob", channel="secret", kind="O",
                                 mention=True)  # fmt: skip
        await admissions.wait_for(new)
        assert any(c["channel"] == "secret" for c in mattermost.catchups)  # it was read
        assert old not in admissions.ids


@pytest.mark.parametrize("status", [403, 404, 500])
async def test_a_channel_that_cannot_be_read_is_skipped_this_time(mattermost, status):
    admissions = Admissions()
    async with adapter(mattermost, admissions) as run:
        mattermost.unreadable("dm-bob", status)
        mattermost.drop(then="while away", user="bob")
        missed = last_in(mattermost, "dm-bob")
        await in_thread(mattermost.wait_authenticated, 2)
        heard = mattermost.message("the others are heard")  # once the catch-up is past bob's
        await admissions.wait_for(heard)
        assert missed not in admissions.ids
        mattermost.unreadable("dm-bob", None)
        mattermost.drop()  # the next catch-up reads it: its start was kept
        await admissions.wait_for(missed)
        assert run.restarts == 0
