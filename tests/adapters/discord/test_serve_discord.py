"""Discord end to end: `hermes serve` as a process, the fake Discord, the fake model."""

from __future__ import annotations

import collections

import pytest
import trio

from tests.adapters.serving import in_thread, until_line
from tests.fakes.openai import text_answer


def replies(discord) -> collections.Counter:
    return collections.Counter(s["message_reference"]["message_id"] for s in discord.sent)


async def burst(serve, model, discord, count: int, at: int, fault) -> list[str]:
    """`count` DMs from as many users into a settled connection, `fault()` after the
    `at`-th, all answered; serve stopped; the message ids."""
    model.script(*[text_answer("ok") for _ in range(count)])
    serve.start()
    await in_thread(discord.wait_settled)
    ids = []
    for i in range(count):
        ids.append(discord.message(f"m{i}", channel_id=f"4{i:03}", author_id=f"7{i:03}"))
        if i == at:
            fault()  # the burst goes on
    await in_thread(discord.wait_sent, count, 60.0)
    serve.stop()
    return ids


@pytest.mark.timeout(60)
async def test_a_dm_is_answered(serve, model, discord):
    model.script(text_answer("hello there"))
    serve.start()
    await in_thread(discord.wait_identifies, 1)  # Discord keeps nothing for no one
    asked = discord.message("hi", channel_id="2001")
    [sent] = await in_thread(discord.wait_sent, 1, 30.0)
    serve.stop()
    assert (sent["channel_id"], sent["content"]) == ("2001", "hello there")
    assert sent["message_reference"]["message_id"] == asked


@pytest.mark.timeout(60)
async def test_a_guild_mention_is_answered_and_chatter_ignored(serve, model, discord):
    model.script(text_answer("you called"))
    serve.start()
    await in_thread(discord.wait_identifies, 1)
    discord.message("just chatting", guild_id="500", channel_id="3001")
    asked = discord.message("help", guild_id="500", channel_id="3001", mentions_bot=True)
    [sent] = await in_thread(discord.wait_sent, 1, 30.0)
    serve.stop()
    assert sent["message_reference"]["message_id"] == asked and len(model.requests) == 1


@pytest.mark.timeout(60)
async def test_a_zombie_connection_resumes_and_the_gap_is_answered_once(serve, model, discord):
    model.script(*[text_answer("ok") for _ in range(3)])
    serve.start()
    await in_thread(discord.wait_settled)  # a fresh connection failing waits a backoff
    discord.zombie()
    began = trio.current_time()
    ids = [discord.message(f"gap {i}", channel_id=f"20{i}") for i in range(3)]
    await in_thread(discord.wait_resumes, 1, 30.0)
    assert trio.current_time() - began < 2 * discord.heartbeat_interval + 2
    await in_thread(discord.wait_sent, 3, 30.0)
    serve.stop()
    assert replies(discord) == dict.fromkeys(ids, 1)
    assert discord.identifies == 1 and 4000 in discord.closes


@pytest.mark.timeout(90)
async def test_an_op_7_mid_burst_loses_none_and_answers_none_twice(serve, model, discord):
    ids = await burst(serve, model, discord, 30, 10, discord.reconnect)  # Discord asks
    assert replies(discord) == dict.fromkeys(ids, 1)
    assert discord.lost == [] and discord.identifies == 1 and discord.resumes >= 1
    assert 1000 not in discord.closes and 4000 in discord.closes  # closed to resume


@pytest.mark.timeout(90)
async def test_a_restart_of_hermes_resumes_and_answers_what_came_meanwhile(serve, model, discord):
    model.script(*[text_answer("ok") for _ in range(3)])
    serve.start()
    await in_thread(discord.wait_settled)
    first = discord.message("before", channel_id="2001")
    await in_thread(discord.wait_sent, 1, 30.0)
    serve.stop()
    meanwhile = [discord.message(f"while down {i}", channel_id=f"21{i}") for i in range(2)]
    serve.start()  # the session kept in state.db: resumed, and Discord replays the gap
    await in_thread(discord.wait_sent, 3, 30.0)
    serve.stop()
    assert replies(discord) == dict.fromkeys([first, *meanwhile], 1)
    assert discord.identifies == 1 and discord.resumes == 1 and discord.lost == []


@pytest.mark.timeout(90)
async def test_a_dropped_connection_mid_burst_loses_none_and_answers_none_twice(
    serve, model, discord
):
    ids = await burst(serve, model, discord, 100, 40, discord.drop)
    assert replies(discord) == dict.fromkeys(ids, 1)
    assert discord.identifies == 1 and discord.resumes >= 1


@pytest.mark.timeout(60)
async def test_close_4004_is_fatal_and_4009_starts_a_new_session(serve, model, discord):
    proc = serve.start()
    await in_thread(discord.wait_settled)
    discord.close(4009)
    await in_thread(discord.wait_identifies, 2, 30.0)  # a new session, not a resume
    discord.close(4004)
    await in_thread(until_line, proc, "not restarting")
    status = await serve.status()
    assert status["discord"].detail["adapter"] == "fatal"
    assert "4004" in status["discord"].detail["reason"]
    connections = discord.connections
    serve.stop()
    assert discord.connections == connections and discord.resumes == 0  # no reconnect


@pytest.mark.timeout(60)
async def test_a_429_holds_its_bucket_and_a_global_one_holds_everything(serve, model, discord):
    model.script(*[text_answer(f"r{i}") for i in range(4)])
    discord.rate_limit(channel="5001", retry_after=4.0)
    serve.start()
    await in_thread(discord.wait_identifies, 1)
    discord.message("slow", channel_id="5001", author_id="81")
    await in_thread(discord.wait_refused, 1, 30.0)
    discord.message("fast", channel_id="5002", author_id="82")
    [fast] = await in_thread(discord.wait_sent, 1, 30.0)
    assert fast["channel_id"] == "5002"
    slow = (await in_thread(discord.wait_sent, 2, 30.0))[1]
    assert slow["channel_id"] == "5001" and slow["at"] - fast["at"] > 2
    discord.rate_limit(retry_after=3.0, global_=True)
    discord.message("first", channel_id="5003", author_id="83")
    [refused] = (await in_thread(discord.wait_refused, 2, 30.0))[1:]
    discord.message("second", channel_id="5004", author_id="84")
    later = await in_thread(discord.wait_sent, 4, 30.0)
    assert all(s["at"] - refused["at"] >= 2.9 for s in later[2:])  # everything waited
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_long_reply_arrives_in_ordered_chunks_that_fit(serve, model, discord):
    reply = "\n".join(f"line {i:03} " + "x" * 40 for i in range(100))  # ~5,000 characters
    model.script(text_answer(reply))
    serve.start()
    await in_thread(discord.wait_identifies, 1)
    discord.message("tell me", channel_id="2001")
    await in_thread(discord.wait_sent, 3, 30.0)
    serve.stop()
    chunks = [s["content"] for s in discord.sent]
    assert all(len(c) <= 2000 for c in chunks) and discord.refused == []
    assert "".join(chunks) == reply
