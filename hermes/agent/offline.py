"""The built-in offline model: deterministic, no network, so everything works on day one.

- Plain text is echoed: "You said: <text>".
- Lines of the form `/tool NAME {json}` in the user's message become tool
  calls (several lines, several calls), so a conversation can drive tools. A
  tool that was not offered is called all the same: the agent refuses it, and
  the user reads why.
- After tool results it answers with a short summary of them.
- Asked to compact a conversation, it writes a short deterministic summary.
  Its context window is small (OFFLINE_CONTEXT), so a long chat compacts on
  a fresh machine too.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from hermes.agent.context import COMPACTION_PROMPT
from hermes.agent.provider import ModelReply, OnText, ToolCall

NAME = "offline"
MODEL = "hermes-offline"
OFFLINE_CONTEXT = 8_000  # tokens


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class OfflineProvider:
    name = NAME
    image_px = None  # it reads no images

    def __init__(self, model: str = MODEL, context_tokens: int = OFFLINE_CONTEXT) -> None:
        self.model = model
        self.context_tokens = context_tokens

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: OnText | None
    ) -> ModelReply:
        await trio.lowlevel.checkpoint()  # it answers at once, but is a checkpoint as any call is
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if messages and messages[0].get("content") == COMPACTION_PROMPT:
            lines = _text(last.get("content")).splitlines()
            gist = " / ".join(line[:80] for line in (lines[:2] + lines[-2:]))
            summary = f"{len(lines)} lines of conversation; it began and ended: {gist}"
            return await self._say(summary, None)
        if last.get("role") == "tool":
            results = []
            for msg in reversed(messages):
                if msg.get("role") != "tool":
                    break
                results.append(f"{msg.get('name', 'tool')}: {_text(msg.get('content'))[:500]}")
            reply = "Tool results:\n" + "\n".join(reversed(results))
            return await self._say(reply, on_text)
        user = _text(last.get("content"))
        calls = []
        for n, line in enumerate(user.splitlines()):
            if line.startswith("/tool "):
                name, _, args = line[6:].strip().partition(" ")
                calls.append(ToolCall(f"call_{len(messages)}_{n}", name, args.strip() or "{}"))
        if calls:
            return ModelReply(None, tuple(calls), self.name, self.model)
        return await self._say(f"You said: {user}", on_text)

    async def _say(self, text: str, on_text: OnText | None) -> ModelReply:
        if on_text is not None:
            await on_text(text)  # it has the whole reply at once: one piece
        return ModelReply(text, (), self.name, self.model, 0, len(text.split()))


def tool_line(name: str, /, **args: Any) -> str:
    """The line that makes the offline model call a tool (handy in tests and demos)."""
    return f"/tool {name} {json.dumps(args)}"
