"""The todo tool: a short checklist the model keeps for the session on a long task, so it
and the user see what is done and what is left (the progress message shows it, `/todo`
prints it, and a turn resumed after a restart reads it in its prompt)."""

from __future__ import annotations

from typing import Any

import attrs

from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.state.todos import MAX_ITEMS, MAX_TEXT, STATUSES, TodoItem, set_todo, todo_of

MARKS = {"pending": "☐", "in_progress": "◐", "done": "☑"}


def checklist(items: list[TodoItem]) -> str:
    """The list as the chat and the model see it: one numbered line an item."""
    if not items:
        return "The todo list is empty."
    return "\n".join(f"{MARKS[i.status]} {n}. {i.text}" for n, i in enumerate(items, 1))


@attrs.frozen
class TodoTool:
    name = "todo"
    description = (
        "Keep a short checklist for this session on a task with several steps: add items,"
        " update one's status (pending, in_progress, done) or text by its number, clear the"
        " list. The user sees it; keep it current as you work."
    )
    parameters = obj(
        ["action"],
        action={"type": "string", "enum": ["add", "update", "clear", "show"]},
        items={"type": "array", "items": {"type": "string"}, "description": "to add"},
        number={"type": "integer", "description": "the item to update (from 1)"},
        status={"type": "string", "enum": list(STATUSES)},
        text={"type": "string", "description": "the item's new text"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        action = need(args, "action")
        items = await ctx.db.read(todo_of, ctx.session_id)
        if action == "add":
            added = [_text(t) for t in need(args, "items")]
            if len(items) + len(added) > MAX_ITEMS:
                raise ToolError(f"a todo list holds {MAX_ITEMS} items; update or clear first")
            items = [*items, *(TodoItem(t) for t in added)]
        elif action == "update":
            number = need(args, "number")
            if not isinstance(number, int) or not 1 <= number <= len(items):
                raise ToolError(f"no item {number!r}: the list has {len(items)}")
            status = args.get("status") or items[number - 1].status
            if status not in STATUSES:
                raise ToolError(f"status must be one of {', '.join(STATUSES)}")
            text = _text(args["text"]) if args.get("text") else items[number - 1].text
            items[number - 1] = TodoItem(text, status)
        elif action == "clear":
            items = []
        elif action != "show":
            raise ToolError(f"unknown action {action!r}")
        if action != "show":
            await ctx.db.write(set_todo, ctx.session_id, items)
        return checklist(items)


def _text(value: Any) -> str:
    text = " ".join(str(value).split())
    if not text:
        raise ToolError("an item needs text")
    if len(text) > MAX_TEXT:
        raise ToolError(f"an item is at most {MAX_TEXT} characters")
    return text
