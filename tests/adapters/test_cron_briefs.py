"""A cron brief to a chat is continuable (spec/delivery.md, "Mirrors and continuable
briefs"): a job made in a group chat posts its brief flat into the chat, and a reply
in the brief's own thread, or a plain reply in the chat, continues the job's session."""

from __future__ import annotations

import pytest

from tests.adapters.serving import in_thread
from tests.fakes.openai import text_answer, tool_answer

MADE = ("cronjob", {"action": "create", "schedule": "in 2s", "prompt": "Brief me",
                    "name": "brief"})  # fmt: skip


def said(request: dict) -> list[tuple[str, str]]:
    """The (role, text) of a model request's conversation."""
    return [(m["role"], m.get("content") or "") for m in request["body"]["messages"]]


@pytest.mark.timeout(90)
async def test_a_reply_in_the_briefs_thread_or_flat_continues_the_job(serve, model):
    serve.configure(platform="    allowed_chats: ['g1']\n", top="cron:\n  mirror_delivery: true\n")
    model.script(tool_answer(MADE), text_answer("Scheduled."), text_answer("THE BRIEF"),
                 text_answer("in the thread"), text_answer("in the chat"))  # fmt: skip
    serve.start()
    platform = serve.platform
    platform.inject("@bot brief me in a bit", chat_id="g1", chat_type="group", mentioned=True)
    scheduled, brief = await in_thread(platform.wait_sent, 2, 30.0)
    assert (scheduled["text"], brief["text"]) == ("Scheduled.", "THE BRIEF")
    assert (brief["chat_id"], brief["thread_id"]) == ("g1", None)  # posted flat
    brief_id = "m2"  # the fake numbers what it takes

    platform.inject("@bot and then?", chat_id="g1", chat_type="group", thread_id=brief_id,
                    mentioned=True)  # fmt: skip
    await in_thread(platform.wait_sent, 3, 30.0)
    in_thread_turn = said(model.requests[3])
    assert ("assistant", "THE BRIEF") in in_thread_turn
    assert in_thread_turn[-1] == ("user", "@bot and then?")

    platform.inject("@bot thanks", chat_id="g1", chat_type="group", mentioned=True)
    await in_thread(platform.wait_sent, 4, 30.0)
    flat_turn = said(model.requests[4])
    assert ("assistant", "THE BRIEF") in flat_turn
    assert ("user", "@bot brief me in a bit") in flat_turn  # the job's own session
    assert [s["text"] for s in platform.sent][2:] == ["in the thread", "in the chat"]
    serve.stop()
