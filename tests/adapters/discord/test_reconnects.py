"""The Discord adapter's reconnects, in this process against the fake Discord: a
flapping gateway gets IDENTIFYs at a growing pace, a close at any point is an answer
(not a crash) that keeps the session, an invalid session is waited out while reading
and beating, a zombie is closed with 4000 and said so, and a new incarnation resumes
the session kept in state.db from a sequence never past what was admitted.

Real sockets, so the real clock: early failures back off in tenths of a second here
(QuickDiscord); the pace hermes uses is checked on the virtual clock in test_pacing.py.
"""

from __future__ import annotations

import json
import logging
import random

import pytest

from hermes.actors.backoff import Backoff
from hermes.actors.clock import Clock
from hermes.actors.link import LINK_BACKOFF
from hermes.adapters.cursors import Cursors
from tests.adapters.discord.inprocess import NAME, QuickDiscord, running_discord
from tests.adapters.inprocess import Admissions
from tests.adapters.serving import in_thread
from tests.fakes.discord import BOT_ID, FakeDiscord


@pytest.fixture
def discord():
    with FakeDiscord(heartbeat_interval=0.2) as fake:
        yield fake
        assert fake.internal_errors == []


class PacedDiscord(QuickDiscord):
    """Hermes's pace for early failures, 32 times faster: a quarter second, doubling (up
    to 4 s, where hermes's goes on to 5 min)."""

    reconnect_backoff = Backoff(0.25, 4.0)


class Lowest(random.Random):
    """Jitter that always picks the shortest wait."""

    def uniform(self, a: float, b: float) -> float:
        return a


@pytest.mark.timeout(60)
async def test_a_flapping_gateway_gets_identifies_at_a_growing_pace(discord):
    discord.flap(4000)  # Hello, then a close on every Identify: no session ever begins
    pace = PacedDiscord.reconnect_backoff
    async with running_discord(discord, Admissions(), adapter=PacedDiscord) as run:
        await in_thread(discord.wait_identifies, 6, 30.0)
        times = [p["at"] for p in discord.identify_payloads[:6]]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        for attempt, gap in enumerate(gaps, start=1):  # each waited its backoff at least
            assert gap >= pace.delay(attempt, Lowest()), (attempt, gaps)
        minute = 60 * pace.minimum / LINK_BACKOFF.minimum  # hermes's first minute, here
        assert sum(t < times[0] + minute for t in times) <= 4, gaps
        assert run.status.early_failures >= 5
        assert run.restarts == 0 and len(run.incarnations) == 1  # answers, not crashes
        discord.unflap()
        await in_thread(discord.wait_settled)
        assert run.status.early_failures == 0 and run.status.state == "live"
    assert len(discord.sessions) == 1 and discord.resumes == 0


@pytest.mark.timeout(60)
async def test_no_false_zombie_while_waiting_to_identify_after_an_invalid_session(discord, caplog):
    caplog.set_level(logging.INFO, logger="hermes.adapters")
    async with running_discord(discord, Admissions()) as run:
        first = await in_thread(discord.wait_settled)
        discord.invalid_session(resumable=False)
        await in_thread(discord.wait_identifies, 2, 10.0)
        assert run.restarts == 0
    old, new = discord.identify_payloads
    waited = [h for h in discord.heartbeats if h["socket"] == new["socket"] and h["at"] < new["at"]]
    assert new["socket"] != first and new["at"] - old["at"] >= 1.0
    assert len(waited) >= 4 and all(h["acked"] for h in waited)  # read and beat meanwhile
    assert discord.closes == [4000] and [s["valid"] for s in discord.sessions] == [False, True]
    assert not any("zombie" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(60)
async def test_a_refused_resume_is_followed_by_identify_on_the_same_socket_later(
    discord, registry, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="hermes.adapters")
    state_db = tmp_path / "state.db"
    gone = {"id": "gone", "resume_url": discord.resume_gateway_url, "bot_id": BOT_ID, "seq": 7}
    async with Cursors(registry, state_db, Clock()) as cursors:  # kept by an earlier hermes
        await cursors.put(f"{NAME}:session", json.dumps(gone))
    async with running_discord(
        discord, Admissions(), cursors=lambda: Cursors(registry, state_db, Clock())
    ):
        sock = await in_thread(discord.wait_settled)
    [refused] = discord.resume_attempts
    [fresh] = discord.identify_payloads
    assert (refused["session_id"], refused["seq"], refused["accepted"]) == ("gone", 7, False)
    assert refused["socket"] == fresh["socket"] == sock and fresh["at"] - refused["at"] >= 1.0
    waited = [h for h in discord.heartbeats if refused["at"] < h["at"] < fresh["at"]]
    assert len(waited) >= 4 and all(h["acked"] for h in waited)  # read and beat meanwhile
    assert discord.closes == [] and not any("zombie" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(60)
async def test_a_close_before_identify_or_resume_is_no_crash_and_keeps_the_session(discord):
    admissions = Admissions()
    async with running_discord(discord, admissions) as run:
        await in_thread(discord.wait_settled)
        [session] = discord.sessions
        discord.flap(4000, at="hello")  # the next sockets close before we speak
        discord.close(4000)
        gap = discord.message("sent while the gateway flaps")
        await in_thread(discord.wait_connections, 4, 10.0)
        discord.unflap()
        await in_thread(discord.wait_resumes, 1, 10.0)
        await admissions.wait_for(gap)
        assert run.restarts == 0 and len(run.incarnations) == 1
    assert discord.identifies == 1 and len(discord.sessions) == 1
    attempts = discord.resume_attempts
    assert {a["session_id"] for a in attempts} == {session["session_id"]}
    assert attempts[-1]["accepted"] and admissions.ids == [gap]


@pytest.mark.timeout(60)
async def test_a_zombie_is_closed_with_4000_and_the_log_says_so(discord, caplog):
    caplog.set_level(logging.INFO, logger="hermes.adapters")
    async with running_discord(discord, Admissions()) as run:
        await in_thread(discord.wait_settled)
        discord.zombie()
        await in_thread(discord.wait_resumes, 1, 10.0)
        assert run.restarts == 0
    assert discord.closes == [4000] and discord.identifies == 1
    said = [r.getMessage() for r in caplog.records if r.name.startswith("hermes.adapters")]
    assert any("hermes closed the socket (4000): no heartbeat ACK" in line for line in said)
    assert not any("1000" in line for line in said), said


@pytest.mark.timeout(60)
async def test_a_new_incarnation_resumes_the_kept_session_never_past_admission(
    discord, registry, tmp_path
):
    state_db = tmp_path / "state.db"
    admissions = Admissions()
    async with running_discord(
        discord, admissions, cursors=lambda: Cursors(registry, state_db, Clock())
    ) as run:
        await in_thread(discord.wait_settled)
        [session] = discord.sessions
        admissions.hold("two")  # its admission waits
        first = discord.message("one")
        held = discord.message("two")
        await admissions.wait_for(first, held)
        beats = len(discord.heartbeats)
        await in_thread(discord.wait_heartbeats, beats + 3, 10.0)
        told = [h["d"] for h in discord.heartbeats[beats:]]  # READY is 1, "one" 2
        assert max(told) == told[-1] == 2  # never "two"'s 3 while it is not admitted
        async with Cursors(registry, state_db, Clock()) as cursors:
            kept = json.loads(await cursors.get(f"{NAME}:session") or "{}")
        assert (kept["id"], kept["seq"]) == (session["session_id"], 2)
        later = discord.message("three")
        admissions.fail("two")  # the journal failed: the adapter crashes and restarts
        await in_thread(discord.wait_resumes, 1, 10.0)
        await admissions.wait_for(later)
        assert run.restarts == 1 and len(run.incarnations) == 2
    [resume] = [a for a in discord.resume_attempts if a["accepted"]]
    assert (resume["session_id"], resume["seq"]) == (session["session_id"], 2)
    assert discord.identifies == 1 and 1000 not in discord.closes
    assert admissions.ids == [first, held, held, later]  # "two" came again, nothing lost
