"""Restart recovery (spec/gateway.md), on Telegram: a turn cut by a drain is answered once
after the restart, by one serve even when two start on the home, and not when it is too
old; a turn cut by a SIGKILL while the model thinks (its event admitted, and claimed, in
one commit) is answered once; a turn cut by a crash while its command ran never runs the
command again."""

from __future__ import annotations

import os

import pytest

from hermes.agent.loop import NOT_RUN_AGAIN
from hermes.gateway.turn_follower import RESUMED_PREFIX
from tests.adapters.serving import in_thread
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.telegram import parse_markdown_v2
from tests.processes import wait_ready


def shown(tg) -> list[str]:
    """The messages sent, as the user reads them."""
    return [parse_markdown_v2(s["text"]) for s in tg.sent]


async def _cut_by_a_drain(serve, model, tg) -> None:
    """A message whose turn is in flight (the model is slow) when serve drains."""
    model.delay = 30.0
    serve.start()
    tg.message("what is the answer?")
    await in_thread(model.wait_requests, 1)
    log = serve.stop()  # the drain deadline (1 s) cuts the turn
    assert "still running at its drain deadline" in log
    assert [state for *_, state in serve.journal()] == ["started"]  # left resumable
    assert tg.sent == []  # no "please send it again": it will be answered
    model.delay = 0.0
    model.script(text_answer("42"))


@pytest.mark.timeout(90)
async def test_a_turn_cut_by_a_drain_is_answered_once_after_the_restart(serve, model, tg):
    serve.configure(drain=1)
    await _cut_by_a_drain(serve, model, tg)
    serve.start()
    await in_thread(tg.wait_sent, 1, 30.0)
    assert shown(tg) == [RESUMED_PREFIX + "42"]
    serve.stop()
    assert [state for *_, state in serve.journal()] == ["answered"]
    serve.start()  # a second restart resumes nothing
    serve.stop()
    assert len(tg.sent) == 1 and len(model.requests) == 2


@pytest.mark.timeout(90)
async def test_two_serves_on_one_home_resume_it_once(serve, model, tg):
    serve.configure(drain=1)
    await _cut_by_a_drain(serve, model, tg)
    first = serve.spawn()  # both start before either is ready: they race for the claim
    second = serve.spawn("--no-lock")
    for proc in (first, second):
        wait_ready(proc)
    await in_thread(tg.wait_sent, 1, 30.0)
    for proc in (second, first):
        serve.stop(proc)
    assert shown(tg) == [RESUMED_PREFIX + "42"]
    assert len(model.requests) == 2
    assert serve.assistant_replies() == ["42"]


@pytest.mark.timeout(90)
async def test_a_turn_older_than_the_resume_window_is_not_resumed(serve, model, tg):
    serve.configure(drain=1)
    await _cut_by_a_drain(serve, model, tg)
    serve.configure(drain=1, resume_window=0.001)  # any restart comes later than that
    serve.start()  # ready: the router has looked at the journal already
    log = serve.stop()
    assert "resuming" not in log
    assert len(model.requests) == 1 and tg.sent == []
    assert [state for *_, state in serve.journal()] == ["started"]


@pytest.mark.timeout(90)
async def test_a_sigkill_between_admission_and_the_answer_yields_one_answer(serve, model, tg):
    """The event's one commit before the model call (admitted, and started by the live
    router) is all a SIGKILL leaves; the next serve resumes it, once."""
    model.delay = 30.0
    serve.start()
    tg.message("what is the answer?")
    await in_thread(model.wait_requests, 1)  # the model thinks; nothing answered yet
    serve.kill()
    assert [state for *_, state in serve.journal()] == ["started"]
    assert tg.sent == []
    model.delay = 0.0
    model.script(text_answer("42"))
    serve.start()
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    serve.start()  # and a second restart answers nothing again
    serve.stop()
    assert shown(tg) == [RESUMED_PREFIX + "42"]
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert len(model.requests) == 2
    assert serve.assistant_replies() == ["42"]
    asked = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in asked] == ["what is the answer?"]  # recorded once


@pytest.mark.timeout(90)
async def test_a_turn_cut_by_a_crash_mid_command_never_runs_it_again(serve, model, tg, tmp_path):
    runs, started = tmp_path / "runs", tmp_path / "started"
    os.mkfifo(started)
    command = f"echo ran >> {runs}; echo up > {started}; sleep 60"
    model.script(tool_answer(("terminal", {"command": command})))
    serve.start()
    tg.message("clean up the disk")
    await in_thread(started.read_text)  # the command runs now
    serve.kill()  # a crash: nothing is written after this
    serve.start()
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    assert shown(tg) == [RESUMED_PREFIX + NOT_RUN_AGAIN]
    assert runs.read_text() == "ran\n"  # once, before the crash
    assert len(model.requests) == 1  # and the model was not asked to go on
