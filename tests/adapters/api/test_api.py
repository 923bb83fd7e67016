"""The OpenAI-compatible API (docs/platforms/api.md) through the official `openai` client
against a real `hermes serve`: models, a conversation continued by its header and by the
`user` field, a new one seeded with the client's history, streamed and whole answers, a
tool call through the offline model (an owner's runs, a user's is refused), a wrong key
(401), the rate limit (429 with Retry-After), bad bodies (400, 413); and a request sent
again with its Idempotency-Key after serve was SIGKILLed mid-turn, answered once."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import trio

from hermes.adapters.api.config import ApiConfig
from hermes.agent.offline import tool_line
from hermes.config import ConfigError, Secrets
from hermes.gateway.settings import Config
from hermes.gateway.tree import check_platforms
from hermes.ops.doctor import check_platform
from tests.adapters.api.serving import ALICE, BOB, CAROL
from tests.adapters.serving import in_thread
from tests.fakes.openai import error_answer, text_answer
from tests.seed import rows


def said(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def ask(client: openai.OpenAI, *messages: dict[str, Any], **kwargs: Any) -> str:
    reply = client.chat.completions.create(model="hermes", messages=list(messages), **kwargs)
    return reply.choices[0].message.content


def user_turns(api, user: str) -> list[list[str]]:
    """Each of `user`'s API sessions, as the user messages it holds."""
    found = rows(
        api.home.state_db,
        "SELECT s.id, m.content FROM messages m JOIN sessions s ON s.id = m.session_id"
        " WHERE s.source = 'api' AND s.user_id = ? AND m.role = 'user' ORDER BY m.id",
        user,
    )
    sessions: dict[str, list[str]] = {}
    for session, content in found:
        sessions.setdefault(session, []).append(content)
    return list(sessions.values())


@pytest.mark.timeout(90)
def test_openais_client_talks_to_hermes_agent_as_its_keys_users(api):
    api.configure(model="", rate_limit=3)  # the offline model; three messages a minute each
    api.start()
    alice, bob, carol = api.client(ALICE), api.client(BOB), api.client(CAROL)
    assert [m.id for m in alice.models.list()] == ["hermes", "hermes-offline"]

    # Alice (the owner): a conversation continued by its header, then a tool call.
    first = alice.chat.completions.with_raw_response.create(
        model="hermes", messages=[said("user", "hello")]
    )
    assert first.parse().choices[0].message.content == "You said: hello"
    session = first.headers["x-hermes-session"]
    history = [said("user", "hello"), said("assistant", "You said: hello")]
    again = ask(
        alice, *history, said("user", "and again"), extra_headers={"X-Hermes-Session": session}
    )
    assert again == "You said: and again"
    assert user_turns(api, "alice") == [["hello", "and again"]]  # only the new one, each time
    ran = ask(alice, said("user", tool_line("terminal", command="echo from-the-shell")))
    assert "from-the-shell" in ran and "not available" not in ran

    # Bob (a user): streamed, his owner's tool refused, a new conversation seeded.
    stream = bob.chat.completions.create(
        model="hermes", messages=[said("user", "stream this")], stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "You said: stream this"
    assert chunks[-1].choices[0].finish_reason == "stop"
    refused = ask(bob, said("user", tool_line("terminal", command="echo not-for-bob")))
    assert "the terminal tool is not available to a user" in refused
    assert "not-for-bob\n" not in refused
    seeded = ask(
        bob,
        said("system", "Answer briefly."),
        said("user", "one"),
        said("assistant", "You said: one"),
        said("user", "two"),
    )
    assert seeded.endswith("\n\ntwo")
    assert "system (your client's): Answer briefly.\nuser: one\nassistant: You said: one" in seeded
    assert len(user_turns(api, "bob")) == 3  # no header, no `user`: a session each

    # Carol: a conversation by the `user` field, then past the rate limit.
    assert ask(carol, said("user", "a"), user="thread-1") == "You said: a"
    assert ask(carol, said("user", "b"), user="thread-1") == "You said: b"
    alices = {"X-Hermes-Session": session}  # the name of Alice's conversation: Carol's own
    assert ask(carol, said("user", "c"), extra_headers=alices) == "You said: c"
    assert user_turns(api, "alice")[0] == ["hello", "and again"]
    with pytest.raises(openai.RateLimitError) as limited:
        ask(carol, said("user", "d"))
    assert limited.value.status_code == 429
    assert 1 <= int(limited.value.response.headers["retry-after"]) <= 60
    assert limited.value.body["type"] == "rate_limit_exceeded"
    assert sorted(user_turns(api, "carol")) == [["a", "b"], ["c"]]

    # Refused before anything is admitted: a wrong key, a bad body, one too large.
    with pytest.raises(openai.AuthenticationError) as wrong:
        api.client("sk-wrong").chat.completions.create(model="hermes", messages=[said("user", "x")])
    assert wrong.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.BadRequestError) as bad:
        ask(alice, said("assistant", "no question"))
    assert bad.value.body["param"] == "messages"
    with pytest.raises(openai.APIStatusError) as large:
        ask(alice, said("user", "x" * 1_100_000))
    assert large.value.status_code == 413
    states = [state for platform, _, state in api.journal() if platform == "api"]
    assert sorted(states) == ["answered"] * 9 + ["refused"]
    api.stop()


def _first_try(client: openai.OpenAI, key: dict[str, str]) -> None:
    """The request serve is killed under: the client sees its connection end."""
    with pytest.raises(openai.APIConnectionError):
        ask(client, said("user", "what is the answer?"), extra_headers=key)


@pytest.mark.timeout(120)
async def test_a_request_sent_again_after_a_sigkill_is_answered_once(api, model):
    api.configure()  # the fake model
    model.script(error_answer(400, "the prompt is not acceptable"))
    api.start()
    client, failed = api.client(ALICE), {"Idempotency-Key": "req-41"}
    for _ in range(2):  # a failed turn's request sent again fails again, and runs nothing
        with pytest.raises(openai.InternalServerError) as error:
            await in_thread(lambda: ask(client, said("user", "fail"), extra_headers=failed))
        assert error.value.body["code"] == "turn_failed"
    assert len(model.requests) == 1
    model.delay = 30.0  # the turn is in flight when serve is killed
    key = {"Idempotency-Key": "req-42"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(in_thread, _first_try, client, key)
        await in_thread(model.wait_requests, 2)  # the turn started
        api.kill()
    model.delay = 0.0
    model.script(text_answer("forty-two"))
    api.start()  # the turn is resumed from the journal
    client = api.client(ALICE)  # the API's new port (a free one each start)
    answer = await in_thread(
        lambda: ask(client, said("user", "what is the answer?"), extra_headers=key)
    )
    assert answer.endswith("forty-two")
    again = await in_thread(
        lambda: ask(client, said("user", "what is the answer?"), extra_headers=key)
    )
    assert again == answer  # the same answer, not a new turn
    api.stop()
    assert len(model.requests) == 3  # the failed one, the cut call and the resumed one
    assert user_turns(api, "alice") == [["fail"], ["what is the answer?"]]  # a session each
    assert api.assistant_replies() == ["forty-two"]
    assert [state for *_, state in api.journal()] == ["answered", "answered"]
    assert json.dumps(model.requests[-1]["body"]).count("what is the answer?") == 1


async def test_a_key_variable_named_and_unset_is_named_by_serve_and_doctor(tmp_path):
    config = Config(platforms={"api": ApiConfig(keys={"ALICE_KEY": "alice", "BOB_KEY": "bob"})})
    only_alice = Secrets({"ALICE_KEY": ALICE}, frozenset())
    with pytest.raises(ConfigError, match=r"platforms\.api: the token variable BOB_KEY is not set"):
        check_platforms(config, only_alice, tmp_path / ".env")
    with pytest.raises(ConfigError, match=r"platforms\.api\.keys: name the variable"):
        check_platforms(Config(platforms={"api": ApiConfig()}), only_alice, tmp_path / ".env")
    said = await check_platform("api", config.platforms["api"], only_alice, tmp_path / ".env")
    assert not said.ok and "BOB_KEY not set" in said.detail
    both = Secrets({"ALICE_KEY": ALICE, "BOB_KEY": BOB}, frozenset())
    said = await check_platform("api", config.platforms["api"], both, tmp_path / ".env")
    assert said.ok and said.detail == "keys for alice, bob" and ALICE not in said.detail
