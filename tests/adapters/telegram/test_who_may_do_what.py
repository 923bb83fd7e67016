"""Who may do what, end to end: `hermes serve` as a process on the fake Bot API.

Ann is the owner; Bob is let in and is a user. A user gets no shell, sees only
their own conversations and jobs; an owner's secrets come back redacted
wherever they could show; a stranger costs nothing; a flood costs one notice.
"""

from __future__ import annotations

import json
import re

import pytest

from hermes.agent.offline import tool_line
from hermes.agent.settings import USER_TOOLS
from tests import seed
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN, TOKEN
from tests.fakes.openai import text_answer, tool_answer
from tests.processes import hermes

BOB = 2002
TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"
USERS_MAKE_JOBS = f"agent:\n  tools:\n    user: [{', '.join((*USER_TOOLS, 'cronjob'))}]\n"


def as_bob(tg, text: str) -> None:
    tg.message(text, user_id=BOB, username="bob", first_name="Bob")


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request["body"].get("tools") or ()}


def rows(home, sql: str) -> list[tuple]:
    return seed.rows(home.state_db, sql)


@pytest.mark.timeout(90)
async def test_a_user_gets_no_shell_and_sees_only_their_own(serve, model, tg, home, tmp_path):
    serve.configure(access=TEAM, top=USERS_MAKE_JOBS)
    ran = tmp_path / "ran"
    job = {"action": "create", "schedule": "every 1h", "prompt": "p", "name": "anns"}
    model.script(
        text_answer("noted"),  # Ann: her secret plans
        tool_answer(("cronjob", job)),  # Ann: a job
        text_answer("made"),
        tool_answer(("terminal", {"command": f"touch {ran}"})),  # Bob: a shell
        text_answer("no shell"),
        tool_answer(
            ("session_search", {"query": "xyzzy"}),
            ("cronjob", {"action": "list"}),
            ("cronjob", {"action": "run", "job": "anns"}),
            ("cronjob", {"action": "update", "job": "anns", "prompt": "mine now"}),
            ("send_message", {"target": f"telegram:{ANN}", "text": "hi Ann, from Bob"}),
        ),
        text_answer("nothing"),
    )
    serve.start()
    tg.message("my secret plans: xyzzy")
    await in_thread(tg.wait_sent, 1, 30.0)
    tg.message("make me a job")
    await in_thread(tg.wait_sent, 2, 30.0)
    as_bob(tg, "touch a file")
    await in_thread(tg.wait_sent, 3, 30.0)
    as_bob(tg, "what do others do?")
    await in_thread(tg.wait_sent, 4, 30.0)
    serve.stop()

    assert "terminal" in offered(model.requests[1])  # the owner has the shell
    bob = offered(model.requests[3])
    assert bob == {*USER_TOOLS, "cronjob"}  # never offered: terminal, process
    assert not ran.exists()  # the call was refused before anything ran
    (refused,) = tool_results(model.requests[4])
    assert refused == "error: the terminal tool is not available to a user here (agent.tools.user)"
    search, listed, run, update, send = tool_results(model.requests[6])[-5:]
    assert json.loads(search) == [] and json.loads(listed) == []
    assert run == update == "error: no cron job with id or name 'anns'"
    assert send == "error: you may send messages only to the chat you are in"
    assert rows(home, "SELECT name, prompt, role FROM cron_jobs") == [("anns", "p", "owner")]
    assert rows(home, "SELECT count(*) FROM cron_runs") == [(0,)]
    assert [s["chat_id"] for s in tg.sent] == [ANN, ANN, BOB, BOB]  # nothing reached Ann


@pytest.mark.timeout(90)
async def test_an_owners_secrets_come_back_redacted_everywhere(serve, model, tg, home):
    secret = "sk-only-in-dotenv-5ecret"
    home.root.mkdir(parents=True, exist_ok=True)
    home.env_path.write_text(f"SOME_SERVICE_KEY={secret}\n")
    show = f"pwd; cat {home.env_path} {home.serve_token}"
    serve.configure(model="")  # the built-in model: its reply quotes the command's output
    serve.start()
    tg.message(tool_line("terminal", command=show))
    [reply] = await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    token = home.serve_token.read_text().strip()
    assert "REDACTED" in reply["text"] and "SOME" in reply["text"]
    said = reply["text"].replace("\\", "")  # MarkdownV2's escapes
    assert re.search(rf"{re.escape(str(home.workspace))}/telegram_\w+", said)  # not the home

    serve.configure()  # now the fake provider: what it is sent
    model.script(tool_answer(("terminal", {"command": f"{show}; env"})), text_answer("seen"))
    serve.start()
    tg.message("show me the secrets")
    await in_thread(tg.wait_sent, 2, 30.0)
    serve.stop()

    sent_to_model = json.dumps(model.requests[-1]["body"])
    assert "REDACTED" in sent_to_model
    transcript = "\n".join(r[0] or "" for r in rows(home, "SELECT content FROM messages"))
    log = (home.logs / "hermes.log").read_text()
    for text in (reply["text"], sent_to_model, transcript, log):
        for value in (secret, token, TOKEN):
            assert value not in text


@pytest.mark.timeout(60)
async def test_a_strangers_media_is_never_fetched(serve, model, tg):
    serve.configure(access="")  # strangers get pairing codes
    serve.start()
    photo = tg.add_file(b"\x89PNG a stranger's image", "photos/stranger.jpg")
    tg.message("look at this", user_id=555, photo=photo)
    [offer] = await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    assert "pairing code" in offer["text"]
    assert [c for c in tg.calls if c["method"] == "getFile"] == [] and tg.downloads == []
    assert model.requests == []


@pytest.mark.timeout(120)
async def test_a_hundred_messages_in_a_minute_cost_at_most_21_replies(serve, model, tg):
    serve.configure(access=TEAM, rate_limit=20)
    model.default = text_answer("ok")
    serve.start()
    for i in range(100):
        tg.message(f"message {i}")
    as_bob(tg, "am I still answered?")  # routed after all of Ann's: its answer ends the flood
    await in_thread(lambda: tg.wait_sent(1, 60.0, chat_id=BOB))
    serve.stop()  # turns still running finish and are answered
    to_ann = [s["text"] for s in tg.sent if s["chat_id"] == ANN]
    assert len(to_ann) <= 21
    assert len([t for t in to_ann if "faster than I answer" in t]) == 1
    assert len(model.requests) <= 21  # Ann's first 20 and Bob's; the rest cost nothing


@pytest.mark.timeout(90)
async def test_a_fourth_stranger_evicts_the_oldest_pending_request(serve, model, tg):
    serve.configure(access="")
    serve.start()
    for n, user in enumerate((601, 602, 603, 604), start=1):
        tg.message("hello?", user_id=user)
        await in_thread(tg.wait_sent, n, 30.0)
    codes = [re.search(r"approve telegram ([A-Z2-9]{8})", s["text"]).group(1) for s in tg.sent]
    tg.message("hello again?", user_id=601)  # evicted, and within its hour: nothing
    evicted = await in_thread(hermes, "pairing", "approve", "telegram", codes[0])
    assert evicted.returncode != 0 and "no pending request" in evicted.stderr
    newest = await in_thread(hermes, "pairing", "approve", "telegram", codes[3])
    assert newest.returncode == 0, newest.stderr
    await in_thread(tg.wait_sent, 5, 30.0)  # 604 is told they are in
    serve.stop()
    assert [s["chat_id"] for s in tg.sent] == [601, 602, 603, 604, 604]
