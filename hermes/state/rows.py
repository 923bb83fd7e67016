"""Plain-data rows read from state.db, and the SELECT lists that fill them."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class SessionRow:
    id: str
    source: str
    session_key: str | None
    chat_id: str | None
    chat_type: str | None
    thread_id: str | None
    user_id: str | None
    user_name: str | None
    scope_id: str | None
    title: str | None
    title_source: str | None
    parent_session_id: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    message_count: int
    tool_call_count: int
    input_tokens: int
    output_tokens: int
    model: str | None
    last_activity_at: float | None
    busy: str | None = None  # `/busy` here: interrupt, queue or steer (None: config's)
    todo: str | None = None  # its todo list, as JSON (hermes.state.todos)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class MessageRow:
    id: int
    session_id: str
    role: str
    content: str | None
    tool_calls: str | None
    tool_call_id: str | None
    tool_name: str | None
    timestamp: float
    token_count: int | None
    platform_message_id: str | None
    undone_at: float | None = None  # /undo took it out of what the model sees
    untrusted: str | None = None  # why its text is not from an owner's hands (None: it is)
    attachments: str | None = None  # a user's files, as JSON (hermes.adapters.media.Saved)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def columns(row_type: type) -> str:
    """The column list matching `row_type`'s fields, in order."""
    return ", ".join(f.name for f in attrs.fields(row_type))


SESSION_SELECT = f"SELECT {columns(SessionRow)} FROM sessions"
MESSAGE_SELECT = f"SELECT {columns(MessageRow)} FROM messages"
