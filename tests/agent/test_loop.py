"""The agent loop against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import functools
import json
import os

import httpx
import pytest
import trio
import trio.testing

from hermes.adapters.contract import StepKind, Target, TurnStep
from hermes.adapters.cursors import put_cursor
from hermes.agent.chain import AllProvidersFailed, ProviderChain
from hermes.agent.context import INTERRUPTED
from hermes.agent.loop import Agent
from hermes.agent.offline import OfflineProvider, tool_line
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.tools.catalog import default_tools
from hermes.delivery.replies import Answer
from hermes.state.messages import messages_of
from hermes.state.sessions import get_session
from hermes.terminal.tree import _stat
from tests.fakes.openai import (
    closed_port_url,
    error_answer,
    stream_answer,
    text_answer,
    tool_answer,
)
from tests.state.helpers import Gate, writer_of


def provider(fake_or_url, name="A", model="model-a", key="sk-test-a"):
    url = fake_or_url if isinstance(fake_or_url, str) else fake_or_url.url
    return OpenAICompatible(name, model, url, key)


def agent(*providers, max_turns=5):
    return Agent(ProviderChain(list(providers)), default_tools(), max_turns)


async def transcript(ctx):
    return [(m.role, m.content) for m in await ctx.db.read(messages_of, ctx.session_id)]


async def test_plain_reply(fake, ctx):
    fake.script(text_answer("Hello there.", prompt_tokens=12))
    result = await agent(provider(fake)).run_turn(ctx, "hi", stream=False)
    assert result.text == "Hello there." and result.model_calls == 1
    assert await transcript(ctx) == [("user", "hi"), ("assistant", "Hello there.")]
    request = fake.requests[0]
    assert request["auth"] == "Bearer sk-test-a"
    assert request["body"]["model"] == "model-a"
    assert request["body"]["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in request["body"]["tools"]} >= {"terminal", "memory"}
    session = await ctx.db.read(get_session, "s1")
    assert session.input_tokens == 12 and session.output_tokens == 2


async def test_streamed_reply(fake, ctx):
    fake.script(stream_answer(["Str", "eam", "ed!"]))
    events: list[TurnStep] = []

    async def on_step(step: TurnStep) -> None:
        events.append(step)

    result = await agent(provider(fake)).run_turn(ctx, "stream please", on_step)
    assert [e.text for e in events if e.kind is StepKind.TEXT] == ["Str", "eam", "ed!"]
    assert events[-1] == TurnStep(StepKind.DONE, "Streamed!")
    assert result.text == "Streamed!"
    assert fake.requests[0]["body"]["stream"] is True


async def test_two_tool_calls_run_and_their_results_go_back(fake, ctx, home):
    fake.script(
        tool_answer(
            ("terminal", {"command": "echo from-the-shell"}),
            ("memory", {"action": "add", "target": "user", "text": "prefers tea"}),
        ),
        text_answer("Done both."),
    )
    result = await agent(provider(fake)).run_turn(ctx, "do two things", stream=False)
    assert result.text == "Done both." and result.model_calls == 2
    second = fake.requests[1]["body"]["messages"]
    tool_msgs = [m for m in second if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_0", "call_1"]  # call order kept
    assert json.loads(tool_msgs[0]["content"])["output"].strip() == "from-the-shell"
    assert tool_msgs[1]["content"] == "added to USER.md"
    assert (home.memories / "USER.md").read_text() == "- prefers tea\n"
    roles = [r for r, _ in await transcript(ctx)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    # memory is in the next turn's system prompt
    fake.script(text_answer("ok"))
    await agent(provider(fake)).run_turn(ctx, "again", stream=False)
    assert "- prefers tea" in fake.requests[2]["body"]["messages"][0]["content"]


async def test_401_falls_back_to_b_with_its_own_model(fake, ctx):
    fake.script(error_answer(401, "bad key"), text_answer("B here"))
    a = provider(fake, "A", "model-a", "sk-wrong")
    b = provider(fake, "B", "model-b", "sk-b")
    result = await agent(a, b).run_turn(ctx, "hi", stream=False)
    assert (result.text, result.provider, result.model) == ("B here", "B", "model-b")
    assert [r["body"]["model"] for r in fake.requests] == ["model-a", "model-b"]
    assert [r["auth"] for r in fake.requests] == ["Bearer sk-wrong", "Bearer sk-b"]


async def test_refused_connection_falls_back(fake, ctx):
    fake.script(text_answer("B answers"))
    dead = provider(closed_port_url(), "A", "model-a")
    result = await agent(dead, provider(fake, "B", "model-b")).run_turn(ctx, "hi", stream=False)
    assert (result.text, result.provider) == ("B answers", "B")


async def test_429_then_200_is_retried(fake, ctx, io_clock):
    fake.script(error_answer(429, "slow down", **{"retry-after": "2"}), text_answer("after retry"))
    start = trio.current_time()
    result = await agent(provider(fake)).run_turn(ctx, "hi", stream=False)
    assert result.text == "after retry" and len(fake.requests) == 2
    assert trio.current_time() - start >= 2  # it honoured retry-after


async def test_every_provider_failing_is_an_error_in_the_transcript(fake, ctx, io_clock):
    fake.script(*[error_answer(500, "down")] * 3)
    with pytest.raises(AllProvidersFailed):
        await agent(provider(fake)).run_turn(ctx, "hi", stream=False)
    assert (await transcript(ctx))[-1][1].startswith("[the turn failed:")


async def test_cancel_mid_stream_records_the_interruption(fake, ctx):
    fake.script(stream_answer(["one ", "two ", "three ", "four"], pause=0.5))
    first_text = trio.Event()

    async def on_step(step: TurnStep) -> None:
        if step.kind is StepKind.TEXT:
            first_text.set()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent(provider(fake)).run_turn, ctx, "tell me", on_step)
            await first_text.wait()
            scope.cancel()
    assert (await transcript(ctx))[-1] == ("system", INTERRUPTED)


class Answering(OfflineProvider):
    """The offline model, saying when it has answered."""

    answered = trio.Event()

    async def complete(self, *args, **kwargs):
        try:
            return await super().complete(*args, **kwargs)
        finally:
            self.answered.set()


async def test_a_continuing_turn_queues_its_message_and_reply_together(ctx, registry, home):
    model = Answering()
    offline = agent(model)
    first = await offline.run_turn(ctx, "one", stream=False)
    writer = writer_of(registry, home.state_db).core
    gate = Gate()
    model.answered = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ctx.db.write, gate.hold)  # the writer is busy
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(functools.partial(
            offline.run_turn, ctx, "two", stream=False, conversation=first.conversation
        ))  # fmt: skip
        await model.answered.wait()  # the model answered without waiting for the writer
        await trio.testing.wait_all_tasks_blocked()  # and its reply is queued
        before = writer.batches
        gate.set()
    assert writer.batches - before == 2  # the busy batch, then message and reply in one
    assert (await transcript(ctx))[2:] == [("user", "two"), ("assistant", "You said: two")]


async def test_a_continuing_turn_cancelled_mid_stream_keeps_the_users_message(fake, ctx):
    fake.script(text_answer("first"), stream_answer(["one ", "two ", "three"], pause=0.5))
    model = agent(provider(fake))
    first = await model.run_turn(ctx, "hello", stream=False)
    started = trio.Event()

    async def on_step(step: TurnStep) -> None:
        started.set()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(
                model.run_turn, ctx, "tell me", on_step,
                conversation=first.conversation,
            ))  # fmt: skip
            await started.wait()
            scope.cancel()
    assert (await transcript(ctx))[2:] == [("user", "tell me"), ("system", INTERRUPTED)]


async def test_cancel_kills_a_running_commands_tree(fake, ctx, home):
    pidfile = home.root / "child.pid"
    fifo = home.root / "up"
    import os

    os.mkfifo(fifo)
    command = f"sleep 300 & echo $! > {pidfile}; echo up > {fifo}; wait"
    fake.script(tool_answer(("terminal", {"command": command})))
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent(provider(fake)).run_turn, ctx, "run it", None, False)
            await trio.to_thread.run_sync(fifo.read_text)
            scope.cancel()
    child = int(pidfile.read_text())
    stat = _stat(child)
    assert stat is None or stat[0] in "ZX"
    assert (await transcript(ctx))[-1] == ("system", INTERRUPTED)


async def test_offline_model_drives_tools_without_a_network(ctx):
    line = tool_line("terminal", command="echo offline-tool")
    result = await agent(OfflineProvider()).run_turn(ctx, line, stream=False)
    assert result.model_calls == 2 and "offline-tool" in result.text
    plain = await agent(OfflineProvider()).run_turn(ctx, "hello", stream=False)
    assert plain.text == "You said: hello"


async def test_max_turns_bounds_the_loop(fake, ctx):
    fake.script(*[tool_answer(("memory", {"action": "add", "target": "memory", "text": f"n{i}"}))
                  for i in range(3)])  # fmt: skip
    result = await agent(provider(fake), max_turns=3).run_turn(ctx, "loop", stream=False)
    assert result.text.startswith("[stopped after 3 model calls")
    assert len(fake.requests) == 3


def test_httpx_is_the_client():
    assert isinstance(OpenAICompatible("a", "m", "http://x/v1", None)._client, httpx.AsyncClient)


async def test_independent_tool_calls_run_at_the_same_time(ctx, home):
    """Two commands that can only finish together (each waits for the other through a
    fifo): run one after the other, the first would time out. Results keep call order."""
    ping, pong = home.root / "ping", home.root / "pong"
    for fifo in (ping, pong):
        os.mkfifo(fifo)
    first = f"timeout 10 sh -c 'echo one > {ping}; cat {pong}'"
    second = f"timeout 10 sh -c 'cat {ping}; echo two > {pong}'"
    text = "\n".join([tool_line("terminal", command=first), tool_line("terminal", command=second)])
    result = await agent(OfflineProvider()).run_turn(ctx, text, stream=False)
    rows = [m for m in await ctx.db.read(messages_of, ctx.session_id) if m.role == "tool"]
    outputs = [json.loads(m.content) for m in rows]
    assert [(o["exit_code"], o["output"].strip()) for o in outputs] == [(0, "two"), (0, "one")]
    assert "Tool results" in result.text


async def test_the_final_answer_is_queued_with_the_message_holding_it(fake, ctx):
    """An answer recorded is an answer sent: its outbox rows commit with the final
    assistant message (a tool-calling step queues nothing)."""
    fake.script(tool_answer(("memory", {"action": "add", "target": "user", "text": "tea"})),
                text_answer("Noted."))  # fmt: skip
    answer = Answer(Target("telegram", "42"), "telegram:e1", reply_to="in7", prefix="(late) ")
    await agent(provider(fake)).run_turn(ctx, "remember tea", stream=False, answer=answer)

    def rows(conn):
        return list(conn.execute(
            "SELECT o.chat_id, o.text, o.reply_to, o.idempotency_key, m.content"
            " FROM outbox o JOIN messages m ON m.content = 'Noted.'"))  # fmt: skip

    assert await ctx.db.read(rows) == [("42", "(late) Noted.", "in7", "telegram:e1:0", "Noted.")]


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_settle_write_commits_with_the_final_message_once(fake, ctx, streamed):
    """The router's write (the event's journal row closed) rides on the final message's
    transaction, answer rows or none (a streamed platform), never on a tool-calling
    step's; the DONE step says so, and the router writes nothing after it."""
    fake.script(tool_answer(("memory", {"action": "add", "target": "user", "text": "tea"})),
                text_answer("Done."))  # fmt: skip
    ran: list[float] = []

    def settle(conn, now: float) -> None:
        ran.append(now)
        put_cursor(conn, "closed", "telegram:e2", now)

    answer = None if streamed else Answer(Target("telegram", "42"), "telegram:e2")
    steps: list[TurnStep] = []

    async def on_step(step: TurnStep) -> None:
        steps.append(step)

    await agent(provider(fake)).run_turn(ctx, "hi", on_step, stream=False, answer=answer,
                                         settle=settle)  # fmt: skip
    assert steps[-1].kind is StepKind.DONE and steps[-1].settled and len(ran) == 1

    def rows(conn):
        sql = (
            "SELECT m.content, c.value, (SELECT count(*) FROM outbox) FROM messages m"
            " JOIN adapter_cursors c ON c.updated_at = m.timestamp WHERE c.key = 'closed'"
        )
        return list(conn.execute(sql))

    assert await ctx.db.read(rows) == [("Done.", "telegram:e2", 0 if streamed else 1)]
