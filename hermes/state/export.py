"""A session and its messages as JSON or Markdown (for `hermes sessions export`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hermes.state.rows import MessageRow, SessionRow


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else "-"


def to_json(session: SessionRow, messages: list[MessageRow]) -> str:
    return json.dumps(
        {"session": session.to_dict(), "messages": [m.to_dict() for m in messages]},
        indent=2,
        ensure_ascii=False,
    )


def to_markdown(session: SessionRow, messages: list[MessageRow]) -> str:
    lines = [
        f"# {session.title or session.id}",
        "",
        f"- session: `{session.id}` ({session.source})",
        f"- started: {_when(session.started_at)}",
        f"- ended: {_when(session.ended_at)}"
        + (f" ({session.end_reason})" if session.end_reason else ""),
        f"- messages: {session.message_count}",
        "",
    ]
    for msg in messages:
        label = msg.role if msg.role != "tool" else f"tool {msg.tool_name or ''}".strip()
        undone = f" · undone {_when(msg.undone_at)}" if msg.undone_at is not None else ""
        lines.append(f"## {label} · {_when(msg.timestamp)}{undone}")
        lines.append("")
        if msg.content:
            lines.append(msg.content)
        if msg.tool_calls:
            lines.append(f"```json\n{msg.tool_calls}\n```")
        lines.append("")
    return "\n".join(lines)
