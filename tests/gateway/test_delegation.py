"""Subagents through the router, on the fake model (which counts the requests it answers at
once and keeps each one's messages): tasks in parallel within `max_parallel`, each with
its own conversation; tools a subagent may not have; a failing and a timed-out one
reported while the others finish; /stop ends them all; each a child session."""

from __future__ import annotations

import os

import attrs
import trio

from hermes.adapters.contract import StepKind
from hermes.adapters.settings import PlatformConfig
from hermes.agent.chain import ProviderChain
from hermes.agent.loop import Agent
from hermes.agent.openai_compat import OpenAICompatible
from hermes.agent.settings import DelegateConfig
from hermes.agent.tools.catalog import default_tools
from hermes.cli.main import main
from hermes.gateway.settings import Config
from hermes.state.db import Db
from tests.fakes.openai import Answer, text_answer, tool_answer
from tests.gateway.router_harness import running_router

CONFIG = Config(platforms={"telegram": PlatformConfig(allowed_users=("alice",), owner="alice")})
SECRET = "the parent's secret plan"


def agent_for(fake, delegate: DelegateConfig | None = None) -> Agent:
    chain = ProviderChain([OpenAICompatible("f", "m", fake.url, "k")])
    return Agent(chain, default_tools(), delegate=delegate)


def goals(n: int) -> list[dict]:
    return [{"goal": f"look into library-{i}", "context": f"notes {i}"} for i in range(n)]


def children(fake) -> list[dict]:
    """The requests of subagents (their prompt holds no user message of the parent's)."""
    return [r for r in fake.requests if "You are a subagent" in str(r["body"]["messages"])]


async def sessions(registry, home) -> list[tuple]:
    async with Db(registry, home.state_db) as db:
        return await db.read(lambda c: c.execute(
            "SELECT parent_session_id, title, end_reason FROM sessions"
            " WHERE parent_session_id IS NOT NULL ORDER BY title").fetchall())  # fmt: skip


async def test_four_tasks_run_three_at_a_time_each_with_its_own_conversation(
    registry, home, fake, capsys
):
    fake.delay = 0.3  # each answer takes a while: the places fill
    for i in range(4):
        fake.answer_when(f"Your task: look into library-{i}", text_answer(f"library-{i} is fine"))
    fake.script(tool_answer(("delegate_task", {"tasks": goals(4)})), text_answer("all four fine"))
    async with running_router(registry, home, fake, CONFIG, agent=agent_for(fake)) as h:
        asked = await h.send("alice", f"compare four libraries; {SECRET}")
        done = await h.final(asked)
        assert done.text == "all four fine"
        lines = [s.tool for s in h.replies.steps_of(asked) if s.kind == StepKind.TOOL_CALL]
        usage = (await h.ask("alice", "/usage")).text
    assert "and its 4 subagents" in usage  # their tokens counted with the session's
    assert await trio.to_thread.run_sync(main, ["sessions", "show", done.session_id]) == 0
    shown = capsys.readouterr().out.split("\nsubagents:\n", 1)[1].splitlines()
    assert [line.split()[1] for line in shown] == ["done"] * 4
    assert fake.most_in_flight == 3
    assert len(children(fake)) == 4
    for child in children(fake):
        said = str(child["body"]["messages"])
        assert SECRET not in said  # none of the parent's history
        assert sum(f"library-{i}" in said for i in range(4)) == 1  # its own goal only
    result = fake.requests[-1]["body"]["messages"][-1]["content"]
    assert all(f"Task {i + 1} (done): look into library-{i}" in result for i in range(4))
    assert sorted(line for line in lines if line.startswith("delegate_task: ")) == [
        f"delegate_task: look into library-{i}" for i in range(4)
    ]
    found = await sessions(registry, home)
    assert [(title, why) for _, title, why in found] == [
        (f"look into library-{i}", "done") for i in range(4)
    ]


async def test_a_subagent_never_gets_a_tool_beyond_its_parents_nor_delegates_again(
    registry, home, fake
):
    tasks = [
        {"goal": "send it", "tools": ["send_message"]},
        {"goal": "dig deeper"},
        {"goal": "fetch it", "tools": ["web_fetch"]},  # not a tool this parent has
    ]
    fake.answer_when("Your task: dig deeper", tool_answer(("delegate_task", {"goal": "more"})))
    fake.answer_when("not one this subagent was given", text_answer("could not delegate"))
    fake.script(tool_answer(("delegate_task", {"tasks": tasks})), text_answer("done"))
    async with running_router(registry, home, fake, CONFIG, agent=agent_for(fake)) as h:
        await h.final(await h.send("alice", "go"))
    result = fake.requests[-1]["body"]["messages"][-1]["content"]
    assert "Task 1 (failed): send it\nrefused: not tools a subagent" in result
    assert "Task 2 (done): dig deeper\ncould not delegate" in result
    assert "Task 3 (failed): fetch it\nrefused: not tools a subagent" in result
    (child,) = children(fake)[:1]
    offered = {t["function"]["name"] for t in child["body"]["tools"]}
    assert "delegate_task" not in offered and "send_message" not in offered


async def test_a_failing_and_a_timed_out_subagent_are_reported_while_others_finish(
    registry, home, fake
):
    fake.answer_when("Your task: fail", Answer(status=400, body={"error": {"message": "boom"}}),
                     times=None)  # fmt: skip
    slow = attrs.evolve(text_answer("too late"), delay=5.0)
    fake.answer_when("Your task: linger", slow)
    fake.answer_when("Your task: finish", text_answer("finished"))
    tasks = [{"goal": "fail"}, {"goal": "linger"}, {"goal": "finish"}]
    fake.script(tool_answer(("delegate_task", {"tasks": tasks})), text_answer("reported"))
    agent = agent_for(fake, DelegateConfig(timeout=1.0))
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        assert (await h.final(await h.send("alice", "go"))).text == "reported"
    result = fake.requests[-1]["body"]["messages"][-1]["content"]
    assert "Task 1 (failed): fail" in result
    assert "Task 2 (timed out): linger\nstopped after 1 s" in result
    assert "Task 3 (done): finish\nfinished" in result
    reasons = {title: why for _, title, why in await sessions(registry, home)}
    assert reasons == {"fail": "failed", "linger": "timed out", "finish": "done"}


async def test_stop_ends_every_subagent_and_nothing_starts_after_it(registry, home, fake, tmp_path):
    """The first three of four start (in order): two wait on the model, one runs a command.
    /stop ends them all, the command's process with them (the suite's teardown fails a test
    that leaves one), and the fourth never starts."""
    for i in (1, 2, 3):  # these would wait on the model when /stop comes (a retry too)
        fake.answer_when(f"Your task: look into library-{i}",
                         attrs.evolve(text_answer("late"), delay=30.0), times=None)  # fmt: skip
    started = tmp_path / "started"
    os.mkfifo(started)  # the command says it runs through it
    command = f"echo running > {started}; sleep 30"
    running = tool_answer(("terminal", {"command": command}))
    fake.answer_when("Your task: look into library-0", running)
    fake.script(tool_answer(("delegate_task", {"tasks": goals(4)})))
    async with running_router(registry, home, fake, CONFIG, agent=agent_for(fake)) as h:
        asked = await h.send("alice", "compare")
        await trio.to_thread.run_sync(fake.wait_requests, 4)  # the parent's, and three
        assert await trio.to_thread.run_sync(started.read_text) == "running\n"
        await h.ask("alice", "/stop")
        at_stop = len(fake.requests)
        assert (await h.final(asked)).kind == StepKind.INTERRUPTED
        await h.settle()
    assert len(fake.requests) == at_stop  # nothing asked after the stop
    ended = [(title, why) for _, title, why in await sessions(registry, home)]
    assert ended == [(f"look into library-{i}", "cancelled") for i in range(3)]


async def test_subagents_spend_the_parents_budget_of_model_calls(registry, home, fake):
    """agent.max_turns bounds a turn and its subagents together: three calls in all."""
    fake.answer_when("Your task: keep busy", tool_answer(("todo", {"action": "show"})),
                     times=None)  # fmt: skip
    fake.script(tool_answer(("delegate_task", {"goal": "keep busy"})))
    agent = agent_for(fake)
    agent.max_turns = 3
    async with running_router(registry, home, fake, CONFIG, agent=agent) as h:
        done = await h.final(await h.send("alice", "go"))
    assert len(fake.requests) == 3  # the parent's one, the subagent's two: then none
    assert done.text == "[stopped after 3 model calls without a final answer]"
    (_, _, why), = await sessions(registry, home)  # fmt: skip
    assert why == "done"  # it answered with its own stop
