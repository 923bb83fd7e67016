"""A conversation of 2,000 turns against the fake OpenAI-compatible server: no prompt
passes the model's window, compactions are stored and continued from after a restart,
a failing summary falls back to dropping turns, tool exchanges are never split."""

from __future__ import annotations

import pytest

from hermes.agent.chain import ProviderChain
from hermes.agent.context import COMPACTION_PROMPT, SUMMARY_HEADING, Budgets
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.permissions import Permissions
from hermes.agent.settings import ToolsConfig
from hermes.agent.tools.catalog import default_tools
from hermes.state.messages import messages_of
from tests.agent.exchanges import exchanges_whole
from tests.fakes.openai import error_answer, text_answer, tool_answer

WINDOW = 3_000  # tokens; the fake counts four characters a token


def agent(url: str, window: int = WINDOW, fallback=None) -> Agent:
    providers = [OpenAICompatible("fake", "m", url, "k", context_tokens=window)]
    if fallback is not None:
        providers.append(fallback)
    # one tool: the window is the conversation's, not the tool list's
    tools = {"session_search": default_tools()["session_search"]}
    everything = Permissions.build(ToolsConfig(owner=("*",), user=()), tools)
    return Agent(ProviderChain(providers), tools, budgets=Budgets(0.75, 4), permissions=everything)


def failing_summaries(fake) -> None:
    """Every answer is "noted.", and every summary request fails."""
    fake.default = text_answer("noted.")
    fake.answer_when(COMPACTION_PROMPT, error_answer(500, "the model is overloaded"), times=None)


async def compactions(ctx) -> list[tuple]:
    return await ctx.db.read(
        lambda c, s: list(c.execute("SELECT kind, first_message_id, last_message_id, summary"
                                    " FROM compactions WHERE session_id = ? ORDER BY id", (s,))),
        ctx.session_id,
    )  # fmt: skip


@pytest.mark.timeout(180)
@pytest.mark.long
async def test_two_thousand_turns_stay_in_the_window_and_continue_after_a_restart(ctx, fake):
    fake.default = text_answer("noted.")
    fake.answer_when(COMPACTION_PROMPT, text_answer("we talked about the weather"), times=None)
    model = agent(fake.url)
    conversation = None
    for n in range(2000):
        if n % 100 == 50:  # now and then the model uses a tool
            fake.script(tool_answer(("session_search", {"query": "weather"})),
                        text_answer("searched."))  # fmt: skip
        result = await model.run_turn(ctx, f"turn {n}: " + "what about the weather? " * 4,
                                      stream=False, conversation=conversation)  # fmt: skip
        assert result.text in ("noted.", "searched.")
        conversation = result.conversation
    assert max(fake.prompt_tokens) <= WINDOW  # what the fake counted, request by request
    assert all(exchanges_whole(r["body"]["messages"]) for r in fake.requests)
    stored = await compactions(ctx)
    assert stored and all(kind == "summary" for kind, *_ in stored)
    summaries = [r for r in fake.requests if r["body"]["messages"][0]["content"]
                 == COMPACTION_PROMPT]  # fmt: skip
    assert len(summaries) == len(stored)

    fake.requests.clear()
    restarted = agent(fake.url)  # a new serve: nothing in memory
    await restarted.run_turn(ctx, "where were we?", stream=False)
    (first,) = fake.requests
    sent = first["body"]["messages"]
    assert sent[1]["content"] == f"{SUMMARY_HEADING}\n{stored[-1][3]}"
    assert "turn 1999" in " ".join(m["content"] or "" for m in sent)
    assert len(sent) < 100  # the summary and the turns after it, not 4,000 messages
    assert len(await ctx.db.read(messages_of, ctx.session_id)) > 4000  # the transcript has all


async def test_a_failing_summary_drops_turns_and_the_turn_is_still_answered(ctx, fake):
    failing_summaries(fake)
    model = agent(fake.url)
    conversation = None
    for n in range(150):
        result = await model.run_turn(ctx, f"turn {n}: " + "tell me everything " * 10,
                                      stream=False, conversation=conversation)  # fmt: skip
        assert result.text == "noted."  # never failed because the history is long
        conversation = result.conversation
    stored = await compactions(ctx)
    assert stored and {kind for kind, *_ in stored} == {"dropped"}
    assert "earlier messages were left out" in stored[-1][3]
    assert max(fake.prompt_tokens) <= WINDOW


def is_summary(request: dict) -> bool:
    return request["body"]["messages"][0]["content"] == COMPACTION_PROMPT


async def test_a_failing_summary_keeps_the_recent_turns_and_asks_once_then_backs_off(ctx, fake):
    """The recent turns fit the window but not compaction's target: with the summary
    model failing, only older turns are left out, never the last `keep_turns`; each
    compaction asks for a summary at most once, and after a failure none is asked for
    until the backoff has passed."""
    failing_summaries(fake)
    model = agent(fake.url, window=6_000)
    conversation = None
    asked: list[str] = []
    for n in range(30):
        text = f"paste {n}: " + "the quick brown fox jumps " * 85  # about 2,200 characters
        asked.append(text)
        result = await model.run_turn(ctx, text, stream=False, conversation=conversation)
        assert result.text == "noted."
        conversation = result.conversation
    stored = await compactions(ctx)
    assert len(stored) >= 2 and {kind for kind, *_ in stored} == {"dropped"}
    summaries = [r for r in fake.requests if is_summary(r)]
    assert len(summaries) == 1  # one attempt, then the backoff (a minute at least)
    for request in (r for r in fake.requests if not is_summary(r)):
        users = [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]
        current = asked.index(users[-1])
        assert users[-4:] == asked[max(0, current - 3) : current + 1]  # the last four turns


async def test_a_current_message_longer_than_any_cut_reaches_the_model_whole(ctx, fake):
    failing_summaries(fake)
    model = agent(fake.url)
    conversation = None
    for n in range(6):
        text = f"paste {n}: " + "lorem ipsum dolor sit amet " * 120
        conversation = (await model.run_turn(ctx, text, stream=False,
                                             conversation=conversation)).conversation  # fmt: skip
    whole = "the question: " + "".join(
        f"line {i} of what I pasted, kept whole\n" for i in range(200)
    )
    assert len(whole) > 4 * WINDOW * 0.75 * 0.6 / 2  # past the last resort's cut of any message
    await model.run_turn(ctx, whole, stream=False, conversation=conversation)
    sent = fake.requests[-1]["body"]["messages"]
    assert sent[-1] == {"role": "user", "content": whole}  # byte for byte


async def test_a_fallback_with_a_smaller_window_gets_a_prompt_compacted_for_it(ctx, fake):
    fake.default = text_answer("noted.")
    model = agent(fake.url, window=50_000, fallback=OfflineProvider(context_tokens=2_000))
    conversation = None
    for n in range(40):
        conversation = (await model.run_turn(ctx, f"turn {n}: " + "and more " * 40, stream=False,
                                             conversation=conversation)).conversation  # fmt: skip
    assert not await compactions(ctx)  # the primary's window is large: nothing compacted
    fake.script(error_answer(401, "key revoked"))  # the primary refuses: the fallback answers
    result = await model.run_turn(ctx, "still there?", stream=False, conversation=conversation)
    assert result.provider == "offline" and result.text == "You said: still there?"
    assert await compactions(ctx)  # compacted for the offline model's window first
