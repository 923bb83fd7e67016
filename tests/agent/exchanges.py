"""Checking that a prompt never holds half of a tool-call exchange."""

from __future__ import annotations

from typing import Any


def exchanges_whole(messages: list[dict[str, Any]]) -> bool:
    """Every tool result follows the call that asked for it; every call has its result."""
    waiting: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in waiting:
                return False
            waiting.remove(message["tool_call_id"])
        elif waiting:
            return False
        if message.get("tool_calls"):
            waiting = [c["id"] for c in message["tool_calls"]]
    return not waiting
