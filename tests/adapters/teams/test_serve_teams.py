"""Teams end to end: `hermes serve` as a process, the fake Teams delivering signed
activities to serve's webhook listener, the fake model answering. Each test runs several
stories on one serve (a serve per story would cost seconds each)."""

from __future__ import annotations

import pytest

from tests.adapters.serving import in_thread, until_line
from tests.adapters.teams.serving import ANN
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.teams import CHANNEL, event_id, personal


def _asked(model, n: int = -1) -> str:
    """What the model was asked last in its `n`th request (the user's words)."""
    return str(model.requests[n]["body"]["messages"][-1]["content"])


async def _connected(teams) -> None:
    """Until serve got its token and read the signing keys."""
    await in_thread(lambda: teams.wait_until(lambda f: f.token_grants and f.key_fetches,
                                             what="serve connected"))  # fmt: skip


@pytest.mark.timeout(90)
async def test_a_dm_a_channel_mention_and_its_thread_are_answered_and_chatter_not(
    serve, model, teams
):
    model.script(text_answer("Hello from hermes"), text_answer("up: the markets"),
                 text_answer("then: more"))  # fmt: skip
    await in_thread(serve.start)
    dm = teams.message("hi there")
    [answer] = await in_thread(teams.wait_sent, 1, 30.0)
    assert (answer["conversation"], answer["text"]) == (personal(ANN), "Hello from hermes")
    assert answer["text_format"] == "markdown"
    assert (await in_thread(teams.wait_delivered, dm))["status_code"] == 200

    chatter = teams.message("lunch anyone?", where="channel")  # no mention: not for hermes
    await in_thread(teams.wait_delivered, chatter)
    root = teams.message("what's up?", where="channel", mention=True)
    sent = await in_thread(teams.wait_sent, 2, 30.0)
    thread = f"{CHANNEL};messageid={root}"
    assert (sent[1]["conversation"], sent[1]["text"]) == (thread, "up: the markets")
    assert "<at>" not in _asked(model) and "what's up?" in _asked(model)

    teams.message("and then?", where="channel", thread=root, mention=True)
    sent = await in_thread(teams.wait_sent, 3, 30.0)
    assert (sent[2]["conversation"], sent[2]["text"]) == (thread, "then: more")
    history = str(model.requests[-1]["body"]["messages"])
    assert "what's up?" in history and "up: the markets" in history  # the thread's session
    serve.stop()
    assert len(model.requests) == 3  # the chatter cost no turn
    answered = {e for _, e, state in serve.journal() if state == "answered"}
    assert event_id(dm) in answered and event_id(root, where="channel") in answered
    assert "hi there" not in str(model.requests[1]["body"]["messages"])  # a DM is its own


@pytest.mark.timeout(90)
async def test_forged_requests_are_refused_and_cost_nothing_and_a_rotated_key_is_fetched(
    serve, model, teams
):
    model.script(text_answer("signed by the new key"))
    await in_thread(serve.start)
    await _connected(teams)
    fetches = teams.key_fetches
    teams.rotate_keys()
    rotated = teams.message("after the rotation")
    await in_thread(teams.wait_sent, 1, 30.0)
    assert teams.key_fetches == fetches + 1  # fetched once for the new key id, then kept
    assert (await in_thread(teams.wait_delivered, rotated))["status_code"] == 200
    for forge in ("kid", "signature", "audience", "expired", "service_url", "channel"):
        forged = teams.message(f"forged: {forge}", forge=forge)
        [attempt] = await in_thread(teams.wait_attempts, forged)
        assert attempt["status_code"] == 401, forge
    serve.stop()
    assert teams.key_fetches == fetches + 1  # an unknown key id within the minute: no fetch
    assert [e for _, e, _ in serve.journal()] == [event_id(rotated)]
    assert len(model.requests) == 1 and len(teams.sent) == 1


@pytest.mark.timeout(90)
async def test_refusals_a_token_refreshed_on_a_401_and_a_revoked_secret_in_status(
    serve, model, teams
):
    """A 401 fetches a new token once; 429 waits its Retry-After, 412 goes again, 413 and
    403 are dead with their meaning; a revoked secret ends sends, shown in status, the
    row kept, and what Teams sends still admitted."""
    model.script(*(text_answer(f"answer {n}") for n in range(7)))
    await in_thread(serve.start)
    await _connected(teams)
    grants = teams.token_grants
    teams.expire_tokens()
    teams.message("one")
    await in_thread(teams.wait_sent, 1, 30.0)
    assert teams.token_grants == grants + 1

    assert [r["status"] for r in teams.refused] == [401]  # once: the new token was taken
    teams.fail(429, retry_after=1)
    teams.fail(412, "PreconditionFailed")
    teams.message("two")
    sent = await in_thread(teams.wait_sent, 2, 30.0)
    assert sent[1]["text"] == "answer 1"
    refused = teams.refused[1:]
    assert [r["status"] for r in refused] == [429, 412]
    assert refused[1]["at"] - refused[0]["at"] >= 0.9  # it waited as told

    teams.fail(413, "MessageSizeTooBig")
    teams.message("three")
    await serve.until_outbox("dead")
    teams.fail(403, "BotNotInConversationRoster")
    teams.message("four")
    await serve.until_outbox("dead", 2)
    grants = teams.token_grants
    teams.fail(401, "Unauthorized", times=2)  # a fresh token refused too: not the secret
    teams.message("four and a half")
    await serve.until_outbox("dead", 3)
    assert teams.token_grants == grants + 1
    assert (await serve.status())["teams"].detail["adapter"] == "live"

    teams.revoke_secret()
    teams.message("five")
    await in_thread(teams.wait_until, lambda f: f.token_refusals > 0)
    await in_thread(until_line, serve.procs[-1], "; not sending")  # its fatal line
    adapter = (await serve.status())["teams"]
    assert adapter.detail["adapter"] == "fatal"
    assert "AADSTS7000222" in adapter.detail["reason"]
    still = teams.message("six")
    assert (await in_thread(teams.wait_delivered, still))["status_code"] == 200
    serve.stop()
    rows = serve.outbox()
    assert [state for _, state, *_ in rows[:5]] == ["sent", "sent", "dead", "dead", "dead"]
    assert "MessageSizeTooBig" in rows[2][2] and "BotNotInConversationRoster" in rows[3][2]
    assert "a token just issued" in rows[4][2]
    assert rows[5][1] not in ("sent", "dead")  # kept for a fixed secret
    assert len(teams.sent) == 2
    log = (serve.home.logs / "hermes.log").read_text()
    assert serve.secret not in log


@pytest.mark.timeout(90)
async def test_a_file_goes_by_consent_card_in_a_personal_chat_and_not_to_a_channel(
    serve, model, teams
):
    sending = {"path": "chart.txt", "caption": "the chart"}
    making = ("terminal", {"command": "printf 'the chart' > chart.txt"})
    model.script(
        tool_answer(making),
        tool_answer(("send_file", sending)),
        text_answer("Sent you the chart."),
        tool_answer(making),
        tool_answer(("send_file", sending)),
        text_answer("Tried."),
    )
    await in_thread(serve.start)
    teams.message("send me the chart")
    consent, told = await in_thread(teams.wait_sent, 2, 30.0)
    [card] = consent["attachments"]
    assert card["contentType"] == "application/vnd.microsoft.teams.card.file.consent"
    assert (card["name"], card["content"]["sizeInBytes"]) == ("chart.txt", 9)
    assert told["text"] == "Sent you the chart."
    teams.accept_file(consent)
    [upload] = await in_thread(teams.wait_uploads, 1, 30.0)
    assert (upload["content"], upload["content_range"]) == (b"the chart", "bytes 0-8/9")
    assert upload["authorization"] is None  # the bot's token never goes to an upload URL
    info = (await in_thread(teams.wait_sent, 3, 30.0))[2]["attachments"][0]
    assert info["contentType"] == "application/vnd.microsoft.teams.card.file.info"
    assert info["name"] == "chart.txt" and info["contentUrl"].endswith(upload["upload"])

    teams.message("the chart here too", where="channel", mention=True)
    await serve.until_outbox("dead")
    serve.stop()
    [dead] = [r for r in serve.outbox() if r[1] == "dead"]
    assert dead[0] == CHANNEL and "only in a personal chat" in dead[2]
