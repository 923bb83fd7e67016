"""Telegram end to end: `hermes serve` as a process, the fake Bot API, the fake model."""

from __future__ import annotations

import collections
import re
import time

import pytest
import trio

from hermes.adapters.telegram.markdown import escape
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.telegram import BOT_USERNAME, parse_markdown_v2, utf16_len
from tests.processes import hermes


@pytest.mark.timeout(60)
async def test_a_dm_from_an_allowed_user_is_answered(serve, model, tg):
    model.script(text_answer("Hello *there*. 1-2!"))
    serve.start()
    tg.message("hi bot")
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    assert sent["chat_id"] == ANN and sent["parse_mode"] == "MarkdownV2"
    assert sent["text"] == r"Hello \*there\*\. 1\-2\!"  # shown as the model wrote it
    assert sent["reply_parameters"]["message_id"] == tg.update(1)["message"]["message_id"]
    assert tg.deleted_webhook_calls[0]["drop_pending_updates"] is False
    assert tg.max_concurrent_polls == 1
    serve.stop()
    assert tg.acked >= 1  # confirmed to Telegram only after it was admitted


@pytest.mark.timeout(60)
async def test_in_a_group_only_a_mention_is_answered_in_its_topic(serve, model, tg):
    serve.configure(platform="    group_policy: open\n")
    model.script(text_answer("in the topic"))
    serve.start()
    tg.message("just chatting", chat_type="supergroup", is_forum=True, thread_id=5)
    tg.message(f"@{BOT_USERNAME} help", chat_type="supergroup", is_forum=True, thread_id=5)
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    assert sent["message_thread_id"] == 5 and sent["text"] == "in the topic"
    serve.stop()
    assert len(model.requests) == 1 and len(tg.sent) == 1  # the first was not for us


EVERYONE = "    allow_all_users: true\n"
RESUMED = "(answered after hermes restarted) "


def answered(tg) -> collections.Counter:
    """How many replies each inbound message id got."""
    return collections.Counter(s["reply_parameters"]["message_id"] for s in tg.sent)


@pytest.mark.timeout(60)
async def test_a_stranger_pairs_and_is_told(serve, model, tg):
    serve.configure(access="")
    model.script(text_answer("welcome aboard"))
    serve.start()
    tg.message("hello?", user_id=555)
    [offer] = await in_thread(tg.wait_sent, 1, 30.0)
    code = re.search(r"approve telegram ([A-Z2-9]{8})", offer["text"]).group(1)
    approved = await in_thread(hermes, "pairing", "approve", "telegram", code)
    assert approved.returncode == 0, approved.stderr
    told = await in_thread(tg.wait_sent, 2, 30.0)
    assert told[1]["chat_id"] == 555
    tg.message("now?", user_id=555)
    sent = await in_thread(tg.wait_sent, 3, 30.0)
    assert sent[2]["text"] == "welcome aboard"
    serve.stop()


@pytest.mark.timeout(90)
async def test_updates_queued_while_down_are_each_answered_once(serve, model, tg):
    serve.configure(access=EVERYONE)
    model.script(*[text_answer("answered") for _ in range(30)])
    ids = [tg.update(tg.message(f"m{i}", user_id=3000 + i))["message"]["message_id"]
           for i in range(30)]  # fmt: skip
    serve.start()
    await in_thread(tg.wait_sent, 30, 60.0)
    serve.stop()
    serve.start()  # a restart answers nothing again
    serve.stop()
    assert answered(tg) == dict.fromkeys(ids, 1)
    assert tg.acked == max(tg.update(u)["update_id"] for u in range(1, 31))


@pytest.mark.timeout(120)
async def test_a_sigkill_mid_burst_answers_every_update_exactly_once(serve, model, tg):
    serve.configure(access=EVERYONE)
    model.delay = 30.0  # turns are running, no reply is on its way, when the kill comes
    serve.start()
    ids = [tg.update(tg.message(f"m{i}", user_id=4000 + i))["message"]["message_id"]
           for i in range(50)]  # fmt: skip
    await in_thread(model.wait_requests, 10)
    serve.kill()
    assert tg.sent == []
    model.delay = 0.0
    model.default = text_answer("answered")  # every request, a retried one too
    serve.start()
    await in_thread(tg.wait_sent, 50, 60.0)
    serve.stop()
    assert answered(tg) == dict.fromkeys(ids, 1)
    assert {s["text"] for s in tg.sent} <= {"answered", escape(RESUMED) + "answered"}


@pytest.mark.timeout(60)
async def test_a_hung_poll_is_replaced_within_its_timeout_and_margin(serve, model, tg):
    model.script(text_answer("back"))
    serve.start()
    await in_thread(tg.wait_polls, 1)
    getme = sum(c["method"] == "getMe" for c in tg.calls)
    tg.hang_polls()
    hung_at = time.monotonic()
    await in_thread(
        lambda: tg.wait_until(
            lambda fake: sum(c["method"] == "getMe" for c in fake.calls) > getme,
            30.0,
            "a new connection",
        )
    )
    replaced = time.monotonic() - hung_at
    assert replaced < 1 + 1 + 3  # poll timeout + margin (2 s), and the first restart's backoff
    tg.unhang_polls()
    tg.message("still there?")
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    assert tg.max_concurrent_polls == 1


@pytest.mark.timeout(60)
async def test_a_429_on_one_chat_delays_only_that_chat(serve, model, tg):
    serve.configure(access=EVERYONE)
    model.script(text_answer("first"), text_answer("second"))
    tg.fail("sendMessage", 429, retry_after=5, chat_id=6001)
    serve.start()
    tg.message("slow", user_id=6001)
    [refused] = await in_thread(tg.wait_refused, 1, 30.0)
    tg.message("fast", user_id=6002)
    fast = await in_thread(tg.wait_sent, 1, 30.0)
    assert fast[0]["chat_id"] == 6002 and fast[0]["at"] - refused["at"] < 5  # not held 5 s
    both = await in_thread(tg.wait_sent, 2, 30.0)
    assert both[1]["chat_id"] == 6001
    assert 5 <= both[1]["at"] - refused["at"] < 20  # when Telegram said, not before
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_long_reply_arrives_in_order_in_chunks_that_fit(serve, model, tg):
    lines = [f"line {i:04} 😀 *x* - y. and some more words" for i in range(250)]
    code = "```python\n" + "\n".join(f"print({i})  # 😀" for i in range(200)) + "\n```"
    reply = "\n".join(lines[:150]) + "\n\n" + code + "\n\n" + "\n".join(lines[150:])
    assert len(reply) > 10_000
    model.script(text_answer(reply))
    serve.start()
    tg.message("tell me everything")
    await in_thread(tg.wait_until, lambda fake: len(fake.sent) >= 3, 30.0, "the chunks")
    await in_thread(serve.stop)
    chunks = [s["text"] for s in tg.sent]
    assert tg.refused == [] and len(chunks) >= 3
    assert all(utf16_len(parse_markdown_v2(c)) <= 4096 for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)  # every fence closed in its chunk
    shown = "".join(parse_markdown_v2(c) for c in chunks)
    positions = [shown.index(f"line {i:04}") for i in range(250)]
    assert positions == sorted(positions)  # in order
    assert [s["message_id"] for s in tg.sent] == sorted(s["message_id"] for s in tg.sent)


@pytest.mark.timeout(60)
async def test_a_cron_brief_to_the_home_channel_continues_the_job(serve, model, tg):
    serve.configure(platform=f"    home_channel: '{ANN}'\n")
    made = ("cronjob", {"action": "create", "schedule": "in 2s", "prompt": "Brief me",
                        "deliver": "telegram", "attach_to_session": True})  # fmt: skip
    model.script(tool_answer(made), text_answer("Scheduled."), text_answer("THE BRIEF"),
                 text_answer("continuing"))  # fmt: skip
    serve.start()
    tg.message("brief me in a bit")
    scheduled, brief = await in_thread(tg.wait_sent, 2, 30.0)
    assert brief["chat_id"] == ANN and brief["text"] == "THE BRIEF"
    await serve.until_mirrored("THE BRIEF")
    tg.message("and?")
    await in_thread(tg.wait_sent, 3, 30.0)
    conversation = [(m["role"], m.get("content")) for m in model.requests[3]["body"]["messages"]]
    assert ("assistant", "THE BRIEF") in conversation
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_photo_reaches_a_text_only_model_as_a_note(serve, model, tg, home):
    model.script(text_answer("nice photo"))
    serve.start()
    photo = tg.add_file(b"\x89PNG fake image bytes", "photos/file_9.jpg")
    tg.message("what is this?", photo=photo)
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    path = re.search(r"\[attached image: .+ at (\S+)\]", asked).group(1)
    assert asked.startswith("what is this?")
    assert "this model cannot see images" in asked
    assert path.startswith(str(home.cache))
    assert await trio.Path(path).read_bytes() == b"\x89PNG fake image bytes"


@pytest.mark.timeout(60)
@pytest.mark.long
async def test_typing_shows_while_a_turn_runs_and_stops_with_it(serve, model, tg):
    serve.configure(access=EVERYONE)
    model.delay = 5.0
    model.script(text_answer("done one"), text_answer("done two"))
    serve.start()
    tg.message("first", user_id=7001)
    [first] = await in_thread(tg.wait_sent, 1, 30.0)
    tg.message("second", user_id=7002)  # 5 s more: chat 7001 would type again by then
    await in_thread(tg.wait_sent, 2, 30.0)
    serve.stop()
    typed = [a for a in tg.actions if a["chat_id"] == 7001]
    assert len(typed) >= 2 and all(a["action"] == "typing" for a in typed)  # every ~4 s
    assert all(a["at"] < first["at"] for a in typed)  # and none after its reply


@pytest.mark.timeout(60)
async def test_formatting_telegram_rejects_is_sent_once_more_as_plain_text(serve, model, tg):
    model.script(text_answer("a.b"))
    tg.fail("sendMessage", 400, "Bad Request: can't parse entities: oops")
    serve.start()
    tg.message("go")
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    assert sent["text"] == "a.b" and "parse_mode" not in sent


@pytest.mark.timeout(60)
async def test_a_migrated_group_is_followed_and_remembered(serve, model, tg):
    serve.configure(access=EVERYONE, platform="    group_policy: open\n")
    model.script(text_answer("here"), text_answer("still here"))
    tg.migrate(-4001, -1009)
    serve.start()
    tg.message(f"@{BOT_USERNAME} hi", chat_type="group", chat_id=-4001)
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    serve.start()  # remembered across a restart: no second refusal
    tg.message(f"@{BOT_USERNAME} again", chat_type="group", chat_id=-4001)
    await in_thread(tg.wait_sent, 2, 30.0)
    serve.stop()
    assert [s["chat_id"] for s in tg.sent] == [-1009, -1009]
    assert len(tg.refused) == 1


# Seconds of 409s (another copy of the bot polling the same token): three of them at least
# (the poll's backoff grows 1, 2, 4, 8 s, jittered into each step's upper half: its cap of
# 15 s is Backoff's own, tested with it), and the wait after the last at most 8 s.
STORM = 6.0


@pytest.mark.timeout(90)
async def test_a_409_storm_recovers_by_itself_with_one_poller(serve, model, tg):
    model.script(text_answer("after the storm"))
    serve.start()
    await in_thread(tg.wait_polls, 1)
    tg.conflict_for(STORM)
    began = time.monotonic()
    await in_thread(tg.wait_conflicts, 2, 30.0)  # backing off from here to the storm's end
    status = await serve.status()
    assert status["telegram"].detail["adapter"] == "backing off"
    assert "409" in status["telegram"].detail["reason"]
    tg.message("are you back?")
    [sent] = await in_thread(tg.wait_sent, 1, STORM + 30)
    assert STORM <= sent["at"] - began < STORM + 8  # the storm, then one backoff at most
    serve.stop()
    assert tg.max_concurrent_polls == 1
    assert sum(c["method"] == "getMe" for c in tg.calls) == 1  # never restarted, never fatal


@pytest.mark.timeout(60)
async def test_a_user_who_blocked_the_bot_is_a_dead_letter_at_once(serve, model, tg):
    model.script(text_answer("you will not see this"))
    tg.fail("sendMessage", 403, "Forbidden: bot was blocked by the user", times=5)
    serve.start()
    tg.message("hi, and goodbye")
    await in_thread(tg.wait_refused, 1, 30.0)
    serve.stop()  # the drain would send a retry that was due: none is
    assert len(tg.refused) == 1 and tg.sent == []
    dead = await in_thread(hermes, "outbox", "--dead")
    assert "dead" in dead.stdout and "blocked by the user" in dead.stdout
