"""Inbound webhooks end to end: `hermes serve` as a process, deliveries posted over HTTP to
its webhook listener as GitHub and a generic sender sign them, the fake model answering,
the answers reaching the fake Telegram where each route says (or nowhere)."""

from __future__ import annotations

import hashlib

import pytest

from hermes.gateway.turn_follower import RESUMED_PREFIX
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.adapters.webhook.serving import HOME_CHAT, generic_delivery, github_delivery
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.telegram import parse_markdown_v2
from tests.seed import rows

RUN = {
    "action": "completed",
    "repository": {"full_name": "ann/hermes"},
    "workflow_run": {"name": "tests", "conclusion": "failure"},
}
PROMPT = "CI on ann/hermes: tests failure"  # the ci route's prompt for RUN


def asked(model) -> list[str]:
    """The user messages of each model request, the last one of each."""
    return [
        [m["content"] for m in r["body"]["messages"] if m["role"] == "user"][-1]
        for r in model.requests
    ]


def said_in(tg, chat: int) -> list[str]:
    return [parse_markdown_v2(s["text"]) for s in tg.sent_to(chat)]


@pytest.mark.timeout(90)
async def test_deliveries_are_verified_admitted_once_and_answered_where_their_route_says(
    serve, model, tg
):
    """One serve for the stories that need no restart: a signed GitHub delivery's answer
    reaches the chat its route names, its redelivery is answered 200 and never again, a
    bad signature is a 401 that costs nothing, and the generic form's answers go to the
    home channel or stay in the route's conversation."""
    model.script(text_answer("The tests job failed on main."))
    await in_thread(serve.start)
    delivery = github_delivery(RUN)

    first = await serve.post("ci", delivery)
    assert (first.status_code, first.text) == (202, "accepted\n")
    [sent] = await in_thread(tg.wait_sent, 1, 30.0)
    assert sent["chat_id"] == ANN and said_in(tg, ANN) == ["The tests job failed on main."]
    assert asked(model) == [PROMPT]
    body_hash = hashlib.sha256(delivery[0]).hexdigest()  # the signature covers the body only
    assert serve.journal() == [("webhook", f"ci:{body_hash}", "answered")]

    again = await serve.post("ci", delivery)  # GitHub's "Redeliver": the same GUID
    assert (again.status_code, again.text) == (200, "accepted before\n")
    replayed = (delivery[0], {**delivery[1], "X-GitHub-Delivery": "a-new-guid"})
    again = await serve.post("ci", replayed)  # a captured delivery sent again as new
    assert (again.status_code, again.text) == (200, "accepted before\n")

    raw, headers = github_delivery(RUN, secret="not-the-secret")
    forged = await serve.post("ci", (raw, headers))
    unsigned = await serve.post("ci", (raw, {**headers, "X-Hub-Signature-256": ""}))
    assert [forged.status_code, unsigned.status_code] == [401, 401]
    raw, headers = github_delivery(RUN)
    tampered = await serve.post("ci", (raw + b" ", headers))  # the body after signing
    assert tampered.status_code == 401
    not_json = await serve.post("alerts", generic_delivery(b"<xml/>"))
    assert (not_json.status_code, not_json.text) == (400, "not JSON\n")
    nowhere = await serve.post("nope", github_delivery(RUN))
    assert nowhere.status_code == 404
    ping = await serve.post("ci", github_delivery({"zen": "Keep it simple."}, event="ping"))
    assert (ping.status_code, ping.text) == (200, "pong\n")
    assert len(serve.journal()) == 1 and len(model.requests) == 1  # none of them came in

    model.script(text_answer("Disk on db1 is 91% full."), text_answer("Noted the form."))
    alert = {"alert": {"name": "disk", "summary": "db1 at 91%"}}
    taken = await serve.post("alerts", generic_delivery(alert))
    assert taken.status_code == 202
    await in_thread(tg.wait_sent, 2, 30.0)
    assert said_in(tg, HOME_CHAT) == ["Disk on db1 is 91% full."]
    form = await serve.post("form", generic_delivery({"message": "/new please"}))
    assert form.status_code == 202
    await serve.until_journal("answered", 3)
    assert asked(model)[1:] == ["Alert disk: db1 at 91%", "[form] /new please"]

    # A route's turn asks where its answer goes (not its own chat, where nobody reads):
    # the question in Ann's chat, answered there by her (an owner) with its button.
    clarify = {"question": "Rerun the tests job?", "choices": ["yes", "no"]}
    model.script(tool_answer(("clarify", clarify)), text_answer("Rerunning it."))
    rerun = {**RUN, "workflow_run": {"name": "lint", "conclusion": "failure"}}
    taken = await serve.post("ci", github_delivery(rerun))
    assert taken.status_code == 202
    *_, question = await in_thread(lambda: tg.wait_sent(2, 30.0, chat_id=ANN))
    assert "Rerun the tests job?" in parse_markdown_v2(question["text"])
    tg.press(question, label="yes")
    await in_thread(lambda: tg.wait_sent(4, 30.0, chat_id=ANN))
    assert said_in(tg, ANN)[2:] == ["Answered: yes", "Rerunning it."]
    assert "The user answered: yes" in str(model.requests[-1]["body"]["messages"][-1])
    logged = serve.stop()
    assert "Noted the form." in serve.assistant_replies()  # kept in the route's conversation
    assert len(tg.sent) == 5  # the redelivery and the form's answer went nowhere
    assert "Keep it simple" not in logged and "ann/hermes" not in logged  # bodies unlogged
    sessions = rows(serve.home.state_db, "SELECT source, chat_id FROM sessions ORDER BY chat_id")
    assert sessions == [("webhook", "alerts"), ("webhook", "ci"), ("webhook", "form")]
    sql = "SELECT s.chat_id, m.untrusted FROM messages m JOIN sessions s ON s.id = m.session_id"
    marks = dict(rows(serve.home.state_db, sql + " WHERE m.role = 'user'"))
    assert marks == {  # each turn's later commands run confined, the owner route's too
        "ci": "a message from webhook user ci",
        "alerts": "a webhook's body",
        "form": "a message from webhook user form",
    }


@pytest.mark.timeout(90)
async def test_a_sigkill_right_after_the_2xx_is_answered_once_after_the_restart(serve, model, tg):
    """The 202 means the delivery is in the journal: serve killed before its turn's answer
    (the model holds it) answers it after the restart, in the route's chat, once."""
    model.delay = 30.0
    await in_thread(serve.start)
    answered = await serve.post("ci", github_delivery(RUN))
    assert answered.status_code == 202
    serve.kill()
    assert [state for *_, state in serve.journal()] == ["started"]
    assert tg.sent == []
    model.delay = 0.0
    model.script(text_answer("The tests job failed on main."))
    await in_thread(serve.start)
    await in_thread(tg.wait_sent, 1, 30.0)
    serve.stop()
    await in_thread(serve.start)  # a second restart answers nothing again
    serve.stop()
    assert said_in(tg, ANN) == [RESUMED_PREFIX + "The tests job failed on main."]
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert asked(model)[-1] == PROMPT
