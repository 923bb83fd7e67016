"""delegate_task's arguments: what a call may ask, refused clearly before any subagent
starts."""

from __future__ import annotations

import pytest

from hermes.agent.delegation import Delegation, Task, tasks_of
from hermes.agent.settings import DelegateConfig
from hermes.agent.tools.base import ToolError


async def never(*args, **kwargs):
    raise AssertionError("no subagent may start")


def test_one_task_or_a_list():
    assert tasks_of({"goal": " look ", "context": "c"}) == [Task("look", "c")]
    assert tasks_of({"tasks": [{"goal": "a", "tools": ["todo"]}]}) == [Task("a", "", ("todo",))]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"tasks": []}, "non-empty list"),
        ({"tasks": ["do it"]}, "task 1: expected an object"),
        ({"tasks": [{"context": "no goal"}]}, "task 1: its goal is missing"),
        ({"goal": "x" * 2001}, "at most 2000 characters"),
        ({"goal": "a", "tools": "terminal"}, "tools must be a list"),
    ],
)
def test_a_bad_call_is_refused_with_its_reason(args, error):
    with pytest.raises(ToolError, match=error):
        tasks_of(args)


async def test_more_tasks_than_a_turn_may_start_are_refused_before_any_starts(ctx):
    delegation = Delegation(never, DelegateConfig(max_total=2), frozenset({"todo"}))
    with pytest.raises(ToolError, match="at most 2 tasks a turn"):
        await delegation.run(ctx, {"tasks": [{"goal": f"g{i}"} for i in range(3)]})
