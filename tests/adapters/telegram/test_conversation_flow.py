"""How people really write, through `hermes serve` on the fake Bot API: a paste in parts,
a photo then its question, a command inside a burst, a kill inside the merge window,
interrupt, queue and steer, a group that answers when spoken to, two bots that stop, and
one person linked across Telegram and Slack."""

from __future__ import annotations

import collections
import os
import re
import sqlite3

import attrs
import pytest
import trio

from hermes.adapters.telegram.markdown import escape
from tests.adapters.serving import in_thread
from tests.adapters.slack.serving import APP_VAR, BOT_VAR
from tests.adapters.telegram.serving import ANN
from tests.fakes.openai import stream_answer, text_answer, tool_answer
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.telegram import BOT_USERNAME

OFF = "    progress: 'off'\n"  # one message per answer: what is sent is what is answered
RESUMED = "(answered after hermes restarted) "


def plain(sent: dict) -> str:
    """A sent message's text as the user reads it (MarkdownV2 escapes dropped)."""
    return re.sub(r"\\(.)", r"\1", sent["text"])


def answered(tg) -> collections.Counter:
    """How many replies each inbound message id got."""
    return collections.Counter(s["reply_parameters"]["message_id"] for s in tg.sent)


def last_user(request: dict) -> str:
    return request["body"]["messages"][-1]["content"]


@pytest.mark.timeout(90)
async def test_a_burst_is_one_turn_and_a_command_in_it_runs_alone(serve, model, tg):
    serve.configure(platform=OFF, merge_window=2)
    model.script(text_answer("all of it"), text_answer("a cat"), text_answer("both parts"))
    serve.start()
    lines = [f"line {i:04d} " + "x" * 80 for i in range(100)]  # 9,000 characters and more
    for part in ("\n".join(lines[:45]), "\n".join(lines[45:90]), "\n".join(lines[90:])):
        tg.message(part)  # a long paste, split by the client as Telegram's are
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    assert plain(sent) == "all of it" and len(model.requests) == 1
    assert last_user(model.requests[0]) == "\n".join(lines)
    photo = tg.add_file(b"\x89PNG a cat", "photos/file_1.jpg")
    tg.message("", photo=photo)
    question = tg.message("what is in this photo?")
    await in_thread(tg.wait_sent, 2, 30.0)
    asked = last_user(model.requests[1])
    assert asked.startswith("what is in this photo?") and "[attached image:" in asked
    assert (
        tg.sent[1]["reply_parameters"]["message_id"] == tg.update(question)["message"]["message_id"]
    )
    tg.message("first part")
    tg.message("/status")
    tg.message("second part")
    sent = await in_thread(tg.wait_sent, 4, 30.0)
    assert "idle" in plain(sent[2])  # the command at once, on its own
    assert plain(sent[3]) == "both parts" and len(model.requests) == 3
    assert last_user(model.requests[2]) == "first part\nsecond part"
    serve.stop()


@pytest.mark.timeout(120)
async def test_a_kill_inside_the_merge_window_answers_every_part_once(serve, model, tg, home):
    serve.configure(platform=OFF, merge_window=30)
    serve.start()
    updates = [tg.message(f"part {i}") for i in range(2)]
    ids = [tg.update(u)["message"]["message_id"] for u in updates]
    await in_thread(tg.wait_until, lambda f: f.acked >= updates[-1], 30.0, "both admitted")
    with sqlite3.connect(home.state_db) as db:
        states = [s for (s,) in db.execute("SELECT state FROM inbound_journal")]
    assert states == ["started", "started"] and not model.requests  # held for the window
    serve.kill()
    model.script(text_answer("one"), text_answer("two"))
    serve.start()
    await in_thread(tg.wait_sent, 2, 60.0)
    serve.stop()
    assert answered(tg) == dict.fromkeys(ids, 1)
    assert [plain(s) for s in tg.sent] == [RESUMED + "one", RESUMED + "two"]
    assert [last_user(r) for r in model.requests] == ["part 0", "part 1"]


def blocking(gate: trio.Path) -> tuple[str, dict]:
    return ("terminal", {"command": f"while [ ! -e {gate} ]; do sleep 0.02; done; echo done"})


@pytest.mark.timeout(120)
async def test_interrupt_queue_and_steer_as_the_model_and_the_user_see_them(
    serve, model, tg, tmp_path
):
    serve.configure(platform=OFF)
    long = stream_answer([f"w{i} " for i in range(100)], pause=0.05)
    gate = trio.Path(tmp_path / "go")
    model.script(long, text_answer("instead"),  # interrupt
                 long, text_answer("after it"),  # queue
                 tool_answer(blocking(gate)), text_answer("in kilometres"))  # fmt: skip
    serve.start()
    tg.message("tell me a story")
    await in_thread(model.wait_requests, 1)
    tg.message("no, a poem")
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    assert plain(sent) == "instead"  # the story was cut and said nothing
    tg.message("/busy queue")
    await in_thread(tg.wait_sent, 2, 30.0)
    tg.message("tell me a story")
    await in_thread(model.wait_requests, 3)
    tg.message("and then?")
    sent = await in_thread(tg.wait_sent, 4, 30.0)
    assert plain(sent[2]).startswith("w0 w1 w2") and "w99" in plain(sent[2])
    assert plain(sent[3]) == "after it"
    tg.message("/busy steer")
    await in_thread(tg.wait_sent, 5, 30.0)
    tg.message("convert 5 miles")
    await in_thread(model.wait_requests, 5)
    tg.message("in km please")
    tg.message("/status")
    sent = await in_thread(tg.wait_sent, 6, 30.0)
    assert "running · 1 waiting" in plain(sent[5])
    await gate.touch()
    sent = await in_thread(tg.wait_sent, 7, 30.0)
    serve.stop()
    assert plain(sent[6]) == "in kilometres" and len(tg.sent) == 7
    seen = [last_user(r) for r in model.requests]
    assert seen[:4] == ["tell me a story", "no, a poem", "tell me a story", "and then?"]
    steered = model.requests[5]["body"]["messages"]
    assert [m["role"] for m in steered[-3:]] == ["assistant", "tool", "user"]
    assert steered[-1]["content"] == "in km please"
    assert "no, a poem" in [m["content"] for m in model.requests[1]["body"]["messages"]]


BOT = 7777  # another bot in the group, allowed to talk
GROUPS = (
    f"    group_policy: open\n    allowed_users: ['{ANN}', '{BOT}']\n    owner: '{ANN}'\n"
    "    groups: {bots: answer, bot_turns: 2}\n" + OFF
)


@pytest.mark.timeout(90)
async def test_a_group_answers_when_spoken_to_and_two_bots_stop(serve, model, tg):
    serve.configure(access=GROUPS)
    model.default = text_answer("here")
    serve.start()
    group = {"chat_type": "group"}
    tg.message("lunch anyone?", **group)  # chatter: unanswered
    mention = tg.message(f"@{BOT_USERNAME} what's for lunch?", **group)
    await in_thread(tg.wait_sent, 1, 30.0)
    reply = tg.message("and dessert?", reply_to_bot=True, **group)
    await in_thread(tg.wait_sent, 2, 30.0)
    bots = []
    for i in range(3):  # the other bot answers each of ours: a loop, cut after two
        bots.append(tg.message(f"beep {i}", user_id=BOT, is_bot=True, reply_to_bot=True, **group))
        if i < 2:
            await in_thread(tg.wait_sent, 3 + i, 30.0)
    tg.message(f"@{BOT_USERNAME} enough, bots", **group)  # a person: answered
    await in_thread(tg.wait_sent, 5, 30.0)
    serve.stop()
    replied = answered(tg)
    ids = {n: tg.update(n)["message"]["message_id"] for n in (mention, reply, *bots)}
    assert replied[ids[mention]] == replied[ids[reply]] == 1
    assert [replied[ids[b]] for b in bots] == [1, 1, 0]
    assert len(model.requests) == 5 and len(tg.sent) == 5


@pytest.mark.timeout(120)
async def test_one_person_on_telegram_and_slack(serve, model, tg):
    """Linked: one memory, and /continue on Slack carries the Telegram conversation."""
    user = 1002
    with FakeSlack() as slack:
        serve.configure(access=f"    allowed_users: ['{ANN}', '{user}']\n    owner: '{ANN}'\n",
                        platform=OFF + f"  slack:\n    token_env: {BOT_VAR}\n"
                        f"    app_token_env: {APP_VAR}\n    base_url: '{slack.url}'\n"
                        "    allowed_users: ['U2']\n")  # fmt: skip
        tokens = serve.tokens()
        serve.tokens = lambda: {**tokens, BOT_VAR: BOT_TOKEN, APP_VAR: APP_TOKEN}
        note = {"action": "add", "target": "user", "text": "Their boat is blue"}
        model.script(tool_answer(("memory", note)), text_answer("noted"),
                     text_answer("blue, as you said"))  # fmt: skip
        serve.start()
        await in_thread(slack.wait_connections, 1)
        tg.message("remember: my boat is blue", user_id=user)
        await in_thread(tg.wait_sent, 1, 30.0)
        tg.message("/link", user_id=user)
        sent = await in_thread(tg.wait_sent, 2, 30.0)
        code = re.search(r"Your link code: ([A-Z0-9]{8})", plain(sent[1])).group(1)

        def said(n: int) -> list[str]:
            slack.wait_until(lambda f: len(f.messages_in("D2")) >= n, 30.0, f"{n} replies")
            return [m["text"] for m in slack.messages_in("D2")]

        slack.message("/link ZZZZ2222", user="U2", channel="D2")
        assert "wrong or has expired" in (await in_thread(said, 1))[0]
        slack.message(f"/link {code}", user="U9", channel="D9")  # not allowed on Slack
        slack.message(f"/link {code}", user="U2", channel="D2")
        assert (await in_thread(said, 2))[1].startswith("Linked: ")
        slack.message("/continue", user="U2", channel="D2")
        assert "Continuing your conversation from telegram" in (await in_thread(said, 3))[2]
        slack.message("what colour is my boat?", user="U2", channel="D2")
        assert (await in_thread(said, 4))[3] == "blue, as you said"
        serve.stop()
        assert slack.messages_in("D9") == []
    asked = model.requests[-1]["body"]["messages"]
    users = [m["content"] for m in asked if m["role"] == "user"]
    assert users == ["remember: my boat is blue", "what colour is my boat?"]
    assert "Their boat is blue" in asked[0]["content"]
    assert escape("noted") == tg.sent[0]["text"]


@pytest.mark.timeout(120)
async def test_a_burst_killed_in_its_command_is_one_turn_and_never_run_again(
    serve, model, tg, tmp_path
):
    started, never = tmp_path / "started", tmp_path / "never"
    os.mkfifo(started)  # the command says it runs through it: the event this waits on
    command = f"echo running > {started}; while [ ! -e {never} ]; do sleep 0.05; done"
    serve.configure(platform=OFF, merge_window=1)
    model.script(tool_answer(("terminal", {"command": command})))
    serve.start()
    ids = [tg.update(tg.message(text))["message"]["message_id"] for text in ("drop the", "table")]
    assert await in_thread(started.read_text) == "running\n"
    serve.kill()
    serve.start()
    [told] = await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    assert "it was not run again" in plain(told) and len(model.requests) == 1
    assert last_user(model.requests[0]) == "drop the\ntable"
    assert answered(tg) == {ids[-1]: 1}  # one answer, to the last part


def showed(tg, found) -> None:
    """Block until a message the bot sent or edited reads as `found` says."""
    tg.wait_until(lambda f: any(found(plain(m)) for m in [*f.sent, *f.edits]), 30.0, "it")


@pytest.mark.timeout(90)
async def test_a_todo_list_shows_while_a_turn_runs_and_outlives_a_restart(serve, model, tg):
    serve.configure(gateway="  progress_interval: 0.2\n")  # Telegram's default: stream
    model.script(
        tool_answer(("todo", {"action": "add", "items": ["check server one", "check two"]})),
        # The model thinks a second, then the command runs one: the list, written as the
        # command starts, is shown while it runs (not replaced at once by the answer).
        attrs.evolve(tool_answer(("terminal", {"command": "sleep 1"})), delay=1.0),
        text_answer("both checked"),
    )
    serve.start()
    tg.message("check my servers")
    await in_thread(showed, tg, lambda text: "☐ 1. check server one" in text)  # while it runs
    await in_thread(showed, tg, lambda text: text == "both checked")
    serve.stop()
    model.script(text_answer("resumed with the list"))
    serve.start()
    tg.message("/todo")
    await in_thread(showed, tg, lambda text: text.startswith("☐ 1. check server one"))
    tg.message("where was I?")
    await in_thread(showed, tg, lambda text: text == "resumed with the list")
    serve.stop()
    system = model.requests[-1]["body"]["messages"][0]["content"]
    assert "## Your todo list for this session\n☐ 1. check server one\n☐ 2. check two" in system


@pytest.mark.timeout(120)
async def test_a_restart_during_delegation_names_the_unfinished_tasks_and_runs_none_again(
    serve, model, tg
):
    serve.configure(platform=OFF)
    tasks = [{"goal": "check alpha"}, {"goal": "check beta"}]
    for goal in ("alpha", "beta"):  # the subagents are still thinking when the kill comes
        model.answer_when(f"Your task: check {goal}",
                          attrs.evolve(text_answer("late"), delay=60.0), times=None)  # fmt: skip
    model.script(tool_answer(("delegate_task", {"tasks": tasks})))
    serve.start()
    tg.message("check both servers")
    await in_thread(model.wait_requests, 3)  # the parent's, and each subagent's
    serve.kill()
    asked = len(model.requests)
    serve.start()
    [told] = await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    named = plain(told).split("subagents worked on: ", 1)[1].split(". They did not finish")[0]
    assert sorted(named.split("; ")) == ["check alpha", "check beta"]
    assert len(model.requests) == asked  # after the restart, nothing was asked again


@pytest.mark.timeout(90)
async def test_a_question_is_answered_by_its_button_on_telegram(serve, model, tg):
    serve.configure(platform=OFF)
    question = {"question": "Which colour?", "choices": ["red", "blue"]}
    model.script(tool_answer(("clarify", question)), text_answer("blue it is"))
    serve.start()
    tg.message("paint the fence")
    [prompt] = await in_thread(tg.wait_sent, 1, 30.0)
    assert plain(prompt).startswith("Question (") and "1. red\n2. blue" in plain(prompt)
    tg.press(prompt, label="blue")
    sent = await in_thread(tg.wait_sent, 3, 30.0)
    serve.stop()
    assert sorted(plain(s) for s in sent[1:]) == ["Answered: blue", "blue it is"]
    assert model.requests[-1]["body"]["messages"][-1]["content"] == "The user answered: blue"
