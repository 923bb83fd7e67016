"""Questions back to the user (clarify), through the router: answered by a button's
command or in the asker's own words, refused to another user, expired on its timeout
and by a restart; each time, what the model was told."""

from __future__ import annotations

import re
import socket

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.agent.settings import AgentConfig
from hermes.gateway.settings import Config
from hermes.state.db import Db
from hermes.state.questions import get_question, open_question
from tests.fakes.openai import text_answer, tool_answer
from tests.gateway.router_harness import running_router
from tests.seed import writing

CONFIG = Config(platforms={"telegram": PlatformConfig(allowed_users=("alice", "bob", "olga"),
                                                      owner="olga")})  # fmt: skip
ASK = tool_answer(("clarify", {"question": "Which colour?", "choices": ["red", "blue"]}))


async def asked(h) -> str:
    """The id of the question the turn waits on, from its prompt in the outbox."""
    await h.router.approval_waits.until_begun(1)
    (text,) = (await h.rows("SELECT text FROM outbox WHERE kind = 'notice'"))[0]
    assert "1. red\n2. blue" in text
    return re.search(r"Question \((\w+)\)", text).group(1)


def told(fake) -> str:
    """What the model was told the answer was (the tool's result in its last request)."""
    return fake.requests[-1]["body"]["messages"][-1]["content"]


async def test_a_button_answers_and_another_user_may_not(registry, home, fake):
    fake.script(ASK, text_answer("blue it is"))
    async with running_router(registry, home, fake, CONFIG) as h:
        turn = await h.send("alice", "paint the fence")
        qid = await asked(h)
        refused = await h.ask("bob", f"/answer {qid} 1")
        assert refused.text == "This question is for telegram user alice."
        assert (await h.ask("alice", f"/answer {qid} 2")).text == "Answered: blue"
        assert (await h.final(turn)).text == "blue it is"
    assert told(fake) == "The user answered: blue"


async def test_the_askers_next_message_is_the_answer(registry, home, fake):
    fake.script(ASK, text_answer("green then"))
    async with running_router(registry, home, fake, CONFIG) as h:
        turn = await h.send("alice", "paint the fence")
        await asked(h)
        words = await h.send("alice", "green, actually")
        assert (await h.final(turn)).text == "green then"
        assert await h.journal(words) == "answered"
        assert h.replies.answers_to(words) == []  # the turn that asked answers it
    assert told(fake) == "The user answered: green, actually"
    assert len(fake.requests) == 2  # no turn of its own


async def test_an_owner_may_answer_for_the_user(registry, home, fake):
    fake.script(ASK, text_answer("red"))
    async with running_router(registry, home, fake, CONFIG) as h:
        turn = await h.send("alice", "paint the fence")
        qid = await asked(h)
        assert (await h.ask("olga", f"/answer {qid} 1")).text == "Answered: red"
        await h.final(turn)
    assert told(fake) == "The user answered: red"


async def test_no_answer_in_time_and_a_restart_expire_the_question(registry, home, fake):
    quick = attrs.evolve(CONFIG, agent=AgentConfig(clarify_timeout=0.5))
    fake.script(ASK, text_answer("went on without"))
    async with running_router(registry, home, fake, quick) as h:
        await h.final(await h.send("alice", "paint the fence"))
        assert told(fake).startswith("No answer (no answer came; question ")
    # A serve killed while its turn waited left a question pending: the next start ends it.
    dead = f"{socket.gethostname()}:{2**22 + 17}:gone"  # no such process
    with writing(home.state_db) as conn:
        left = open_question(conn, "s-dead", "telegram", "alice", "Which?", (), dead, 1.0, 60.0)
    async with running_router(registry, home, fake, CONFIG) as h:
        await h.settle()
    async with Db(registry, home.state_db) as db:
        ended = await db.read(get_question, left.id)
    assert (ended.state, ended.answered_by) == ("expired", "hermes restarted")
