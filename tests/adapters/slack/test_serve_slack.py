"""Slack end to end: `hermes serve` as a process, the fake Slack, the fake model."""

from __future__ import annotations

import collections
import signal

import pytest
import trio

from hermes.agent.settings import USER_TOOLS
from tests.adapters.serving import in_thread, until_line
from tests.fakes.openai import text_answer, tool_answer


@pytest.mark.timeout(60)
async def test_a_dm_is_answered(serve, model, slack):
    model.script(text_answer("hi <you> & welcome"))
    serve.start()
    slack.message("hello", channel="D7")
    [sent] = await in_thread(slack.wait_sent, 1, 30.0)
    assert sent["channel"] == "D7" and "thread_ts" not in sent or not sent.get("thread_ts")
    assert sent["text"] == "hi &lt;you&gt; &amp; welcome"
    serve.stop()
    assert len(slack.acked) == 1


@pytest.mark.timeout(60)
async def test_a_mention_in_a_channel_is_answered_in_its_thread(serve, model, slack):
    model.script(text_answer("in the thread"))
    serve.start()
    event = slack.mention("help me", channel="C5")
    [sent] = await in_thread(slack.wait_sent, 1, 30.0)
    mention_ts = slack.payload(event)["event"]["ts"]
    assert (sent["channel"], sent["thread_ts"]) == ("C5", mention_ts)
    serve.stop()


def replies_by_channel(slack) -> collections.Counter:
    return collections.Counter(s["channel"] for s in slack.sent)


@pytest.mark.timeout(90)
async def test_a_refresh_during_a_burst_loses_none_and_answers_none_twice(serve, model, slack):
    model.script(*[text_answer("ok") for _ in range(100)])
    serve.start()
    await in_thread(slack.wait_connections, 1)
    for i in range(100):
        slack.message(f"m{i}", user=f"U{i}", channel=f"D{i}")
        if i == 30:
            await in_thread(slack.wait_acked, 20)
            slack.disconnect("refresh_requested", close_after=1.0)
    await in_thread(slack.wait_sent, 100, 60.0)
    serve.stop()
    assert replies_by_channel(slack) == {f"D{i}": 1 for i in range(100)}
    assert slack.dropped == [] and slack.connections_opened == 2
    assert slack.max_open_sockets == 2  # the new socket opened before the old one closed


@pytest.mark.timeout(60)
async def test_a_half_open_socket_is_replaced_and_the_event_meanwhile_answered_once(
    serve, model, slack
):
    model.script(text_answer("still here"))
    serve.start()
    await in_thread(slack.wait_connections, 1)
    slack.half_open()
    went_quiet = trio.current_time()
    slack.message("anyone?")
    await in_thread(slack.wait_connections, 2, 30.0)
    assert trio.current_time() - went_quiet < 3 + 1 + 2  # the idle deadline, one backoff
    await in_thread(slack.wait_sent, 1, 30.0)
    serve.stop()
    assert len(slack.sent) == 1


@pytest.mark.timeout(90)
async def test_an_envelope_unacknowledged_when_serve_was_killed_is_answered_once(
    serve, model, slack
):
    model.script(text_answer("after the restart"))
    proc = serve.start()
    await in_thread(slack.wait_connections, 1)
    proc.send_signal(signal.SIGSTOP)  # frozen: the envelope arrives and is never acknowledged
    event = slack.message("are you there?")
    await in_thread(slack.wait_deliveries, 1)
    serve.kill()
    serve.start()
    await in_thread(slack.wait_sent, 1, 30.0)
    serve.stop()
    retried = [d for d in slack.deliveries if d["event_id"] == event]
    assert len(retried) >= 2 and retried[-1]["retry_attempt"] >= 1
    assert len(slack.sent) == 1 and slack.dropped == []


@pytest.mark.timeout(60)
async def test_link_disabled_is_fatal_and_shown(serve, model, slack):
    proc = serve.start()
    await in_thread(slack.wait_connections, 1)
    slack.disconnect("link_disabled")
    await in_thread(until_line, proc, "not restarting")
    status = await serve.status()
    assert status["slack"].detail["adapter"] == "fatal"
    assert "link_disabled" in status["slack"].detail["reason"]
    serve.stop()
    assert slack.connections_opened == 1


@pytest.mark.timeout(60)
async def test_a_429_on_one_channel_delays_only_that_channel(serve, model, slack):
    model.script(text_answer("first"), text_answer("second"))
    slack.fail("chat.postMessage", "ratelimited", retry_after=5, channel="D1")
    serve.start()
    slack.message("slow", user="U1", channel="D1")
    [refused] = await in_thread(slack.wait_refused, 1, 30.0)
    slack.message("fast", user="U2", channel="D2")
    [fast] = await in_thread(slack.wait_sent, 1, 30.0)
    assert fast["channel"] == "D2"
    both = await in_thread(slack.wait_sent, 2, 30.0)
    assert both[1]["channel"] == "D1" and both[1]["at"] - fast["at"] > 3
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_brief_posted_flat_is_continued_flat_and_in_its_thread(serve, model, slack):
    """A job made in a channel posts its brief flat into it (spec/delivery.md, "Mirrors and
    continuable briefs"; mirrored by the global switch, the job says nothing): a plain
    reply in the channel, or a reply in the brief's own thread, continues the job's
    session."""
    made = ("cronjob", {"action": "create", "schedule": "in 2s", "prompt": "Brief me"})
    model.script(tool_answer(made), text_answer("Scheduled."), text_answer("THE BRIEF"),
                 text_answer("flat"), text_answer("threaded"))  # fmt: skip
    # everyone here is a user: cronjob offered to users, for jobs that report back here
    tools = f"agent:\n  tools:\n    user: [{', '.join((*USER_TOOLS, 'cronjob'))}]\n"
    serve.configure(top=tools + "cron:\n  mirror_delivery: true\n")
    serve.start()
    slack.mention("brief me later", channel="C5")
    scheduled, brief = await in_thread(slack.wait_sent, 2, 30.0)
    assert brief["text"] == "THE BRIEF" and not brief.get("thread_ts")  # flat in the channel
    await serve.until_mirrored("THE BRIEF")
    slack.mention("thanks", channel="C5")
    await in_thread(slack.wait_sent, 3, 30.0)
    slack.mention("and then?", channel="C5", thread_ts=brief["ts"])
    await in_thread(slack.wait_sent, 4, 30.0)
    serve.stop()
    flat, threaded = (said(request) for request in model.requests[3:5])
    assert ("assistant", "THE BRIEF") in flat and ("assistant", "THE BRIEF") in threaded
    assert ("user", "brief me later") in flat  # the job's own session
    assert (flat[-1], threaded[-1]) == (("user", "thanks"), ("user", "and then?"))
    assert [s["text"] for s in slack.sent][2:] == ["flat", "threaded"]


def said(request: dict) -> list[tuple[str, str]]:
    """The (role, text) of a model request's conversation."""
    return [(m["role"], m.get("content") or "") for m in request["body"]["messages"]]
