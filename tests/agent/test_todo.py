"""The todo tool on a real state.db: a session's checklist kept with it, bounded, and
refused clearly where a call cannot be done."""

from __future__ import annotations

import pytest

from hermes.adapters.contract import StepKind, Target, TurnStep
from hermes.agent.tools.base import ToolError
from hermes.agent.tools.todo import TodoTool
from hermes.delivery.live import LiveReply
from hermes.state.sessions import NewSession, ensure_session
from hermes.state.todos import MAX_ITEMS, TodoItem, todo_of

TODO = TodoTool()


@pytest.fixture
async def session(ctx):
    await ctx.db.write(ensure_session, NewSession("s1", started_at=0.0))
    return ctx


async def test_the_list_is_kept_with_the_session_and_shown_as_a_checklist(session):
    shown = await TODO({"action": "add", "items": ["compare the libraries", "draft"]}, session)
    assert shown == "☐ 1. compare the libraries\n☐ 2. draft"
    shown = await TODO({"action": "update", "number": 1, "status": "done"}, session)
    shown = await TODO({"action": "update", "number": 2, "status": "in_progress"}, session)
    assert shown == "☑ 1. compare the libraries\n◐ 2. draft"
    assert await session.db.read(todo_of, "s1") == [
        TodoItem("compare the libraries", "done"), TodoItem("draft", "in_progress"),
    ]  # fmt: skip
    assert await TODO({"action": "clear"}, session) == "The todo list is empty."
    assert await session.db.read(todo_of, "s1") == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"action": "update", "number": 3, "status": "done"}, "no item 3"),
        ({"action": "update", "number": 1, "status": "later"}, "status must be one of"),
        ({"action": "add", "items": ["   "]}, "an item needs text"),
        ({"action": "add", "items": ["x" * 201]}, "at most 200 characters"),
        ({"action": "add", "items": ["x"] * (MAX_ITEMS + 1)}, f"holds {MAX_ITEMS} items"),
        ({"action": "burn"}, "unknown action"),
    ],
)
async def test_a_call_that_cannot_be_done_is_refused_and_changes_nothing(session, args, error):
    await TODO({"action": "add", "items": ["one"]}, session)
    with pytest.raises(ToolError, match=error):
        await TODO(args, session)
    assert await session.db.read(todo_of, "s1") == [TodoItem("one")]


@pytest.mark.parametrize(
    ("mode", "shown"), [("stream", "✓ todo\n\n☐ 1. a"), ("tools", "✓ todo\n\n☐ 1. a")]
)
def test_the_progress_message_shows_the_list_under_the_tool_lines(mode, shown):
    live = LiveReply(Target("telegram", "1"), "k", None, mode, 0.0)
    live.take(TurnStep(StepKind.TOOL_CALL, "{}", "todo", "c1"))
    live.take(TurnStep(StepKind.TOOL_RESULT, "☐ 1. a", "todo", "c1"))
    assert live.text() == shown
