"""Long conversations with the built-in offline model: the prompt stays under the
window, compactions are stored, a reload continues from them, tool exchanges stay whole."""

from __future__ import annotations

import attrs
import pytest
import trio

from hermes.agent.chain import ProviderChain
from hermes.agent.context import SUMMARY_HEADING, Budgets
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.tools.catalog import default_tools
from hermes.state.messages import latest_compaction, messages_of
from tests.agent.exchanges import exchanges_whole

WINDOW = 4_000  # tokens: small (half of it the tools), so compaction comes every few dozen turns


def agent(window: int = WINDOW, keep_turns: int = 3) -> Agent:
    provider = OfflineProvider(context_tokens=window)
    return Agent(ProviderChain([provider]), default_tools(), budgets=Budgets(0.75, keep_turns))


async def test_a_long_chat_stays_in_budget_compacts_and_reloads(ctx):
    model = agent()
    provider = model.chain.providers[0]
    conversation = None
    for n in range(300):
        text = f"message {n}: " + "words " * 40
        if n % 7 == 0:
            text += "\n" + tool_line("terminal", command=f"seq 1 {2000 + n}")
        result = await model.run_turn(ctx, text, stream=False, conversation=conversation)
        conversation = result.conversation
        assert result.text  # answered, however long the history
        size = model.budgets.estimate(conversation.prompt(await model.system(ctx, "local")),
                                      model.schema_chars("owner"), provider)  # fmt: skip
        assert size <= provider.context_tokens, (n, size)
        assert exchanges_whole(conversation.messages), n
    compaction = await ctx.db.read(latest_compaction, ctx.session_id)
    assert compaction is not None and compaction.kind == "summary"
    transcript = await ctx.db.read(messages_of, ctx.session_id)
    assert len(transcript) == 300 * 2 + 43 * 2  # the transcript keeps every message
    assert conversation.chars() < 2 * WINDOW * 4  # the actor holds what the prompt needs

    reloaded = await model.load(ctx)  # as a restarted serve does
    assert reloaded.summary == compaction.summary
    assert len(reloaded.messages) < len(transcript) / 10
    assert min(i for i in reloaded.ids if i is not None) > compaction.last_message_id
    prompt = reloaded.prompt("system")
    assert prompt[1]["content"].startswith(SUMMARY_HEADING)


async def test_compress_and_usage_answer_without_the_agent(ctx):
    model = agent(window=8_000)
    conversation = None
    for n in range(12):
        conversation = (await model.run_turn(ctx, f"turn {n} " + "x " * 50, stream=False,
                                             conversation=conversation)).conversation  # fmt: skip
    usage = await model.usage(ctx, conversation, "local")
    assert "of 8000" in usage and "compacts past 6000" in usage
    before = len(conversation.messages)
    said = await model.compress(ctx, conversation, "local")
    assert said.startswith("summarized 18 messages")  # 9 old turns; 3 kept
    assert len(conversation.messages) == before - 18 and conversation.summary
    assert (await ctx.db.read(latest_compaction, ctx.session_id)).kind == "summary"
    assert await model.compress(ctx, conversation, "local") == (
        "nothing to compact: the conversation is short"
    )


@pytest.mark.parametrize("outputs", [1, 3])
async def test_a_huge_tool_output_is_cut_with_its_file_named(ctx, outputs):
    model = agent(window=8_000, keep_turns=1)
    conversation = None
    lines = "\n".join(tool_line("terminal", command=f"seq 1 {20000 + i}") for i in range(outputs))
    result = await model.run_turn(ctx, lines, stream=False, conversation=conversation)
    again = await model.run_turn(ctx, "and now?", stream=False, conversation=result.conversation)
    conversation = again.conversation
    tools = [m for m in conversation.messages if m["role"] == "tool"]
    assert len(tools) == outputs
    for message in tools:
        assert len(message["content"]) < 2_000 and "characters cut" in message["content"]
        path = message["content"].split("the whole output is in ")[1].split(" …]")[0]
        assert "20000" in await trio.Path(path).read_text()  # the whole output, in its file


async def test_recent_turns_too_big_for_the_window_are_compacted_too(ctx):
    """Long pasted messages: the last few turns alone pass the window; the prompt must
    still fit, with the user's current message whole."""
    model = agent(window=5_000, keep_turns=4)
    provider = model.chain.providers[0]
    conversation = None
    for n in range(8):
        text = f"paste {n}: " + "lorem ipsum dolor sit amet " * 150  # 4,050 characters
        result = await model.run_turn(ctx, text, stream=False, conversation=conversation)
        conversation = result.conversation
        assert result.text.startswith(f"You said: paste {n}")
        prompt = conversation.prompt(await model.system(ctx, "local"))
        assert model.budgets.estimate(prompt, model.schema_chars("owner"), provider) <= 5_000
    assert exchanges_whole(conversation.messages)


async def test_a_summary_of_untrusted_text_carries_its_mark_until_new(ctx):
    """A summary written from a stranger's words can carry their instructions: the
    conversation stays marked after /compress, across a reload, and only a new session
    (another conversation) starts without it."""
    model = agent(window=8_000)
    conversation = None
    for n in range(6):
        why = "a message from telegram user bob" if n == 0 else None
        conversation = (await model.run_turn(ctx, f"turn {n} " + "x " * 50, stream=False,
                                             conversation=conversation,
                                             untrusted=why)).conversation  # fmt: skip
    assert conversation.untrusted == "a message from telegram user bob"
    said = await model.compress(ctx, conversation, "local")
    assert said.startswith("summarized")
    assert "turn 0 " not in str(conversation.messages)  # his message left the prompt ...
    assert conversation.untrusted == "a message from telegram user bob"  # ... its mark did not
    compaction = await ctx.db.read(latest_compaction, ctx.session_id)
    assert compaction.untrusted == "a message from telegram user bob"
    assert (await model.load(ctx)).untrusted == "a message from telegram user bob"
    other = attrs.evolve(ctx, session_id="s-new")
    fresh = await model.run_turn(other, "hello", stream=False)
    assert fresh.conversation.untrusted is None
