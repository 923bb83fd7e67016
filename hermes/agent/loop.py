"""The tool-call loop: model -> tools -> model ... -> final text, bounded by max_turns.

Every message is appended to state.db as it happens, so a crash mid-turn
loses nothing already said. Independent tool calls run concurrently; their
results are kept in call order. Cancelling the turn abandons the model
request, kills the trees of running commands (the terminal tool runs them in
the turn's scope) and records the interruption in the transcript.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio

from hermes.agent.chain import ProviderChain
from hermes.agent.prompt import system_prompt
from hermes.agent.provider import ModelReply, ToolCall
from hermes.agent.tools.base import Tool, ToolContext, ToolError, schema
from hermes.state.db import PendingWrite
from hermes.state.messages import NewMessage, append_message, begin_turn, continue_turn
from hermes.state.rows import MessageRow

log = logging.getLogger(__name__)

INTERRUPTED = "[interrupted: the turn was cancelled before it finished]"


@attrs.frozen
class Event:
    """What a client sees of a turn as it happens: text, tool_call, tool_result, done."""

    kind: str
    text: str = ""
    tool: str = ""
    call_id: str = ""


@attrs.frozen
class TurnResult:
    text: str
    model_calls: int
    provider: str
    model: str
    conversation: list[dict[str, Any]] = attrs.field(factory=list, eq=False, repr=False)
    """The whole conversation after the turn, without the system prompt: a caller
    that keeps it passes it back as `history` next time instead of a re-read."""


def history_messages(rows: list[MessageRow]) -> list[dict[str, Any]]:
    """The transcript as chat messages; a tool call left without a result (an
    interrupted turn) gets one, so the provider accepts the history."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def close_pending() -> None:
        for call_id in pending:
            out.append({"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED})
        pending.clear()

    for row in rows:
        if row.role == "tool":
            if row.tool_call_id in pending:
                pending.remove(row.tool_call_id)
                out.append({"role": "tool", "tool_call_id": row.tool_call_id,
                            "content": row.content or ""})  # fmt: skip
            continue
        close_pending()
        message: dict[str, Any] = {"role": row.role, "content": row.content or ""}
        if row.role == "assistant" and row.tool_calls:
            calls = json.loads(row.tool_calls)
            message["tool_calls"] = calls
            message["content"] = row.content
            pending.extend(c["id"] for c in calls)
        out.append(message)
    close_pending()
    return out


class Agent:
    def __init__(self, chain: ProviderChain, tools: dict[str, Tool], max_turns: int = 20) -> None:
        self.chain = chain
        self.tools = tools
        self.max_turns = max_turns
        self._schemas = [schema(t) for t in tools.values()]

    async def run_turn(
        self,
        ctx: ToolContext,
        user_text: str,
        on_event: Callable[[Event], None] | None = None,
        stream: bool = True,
        source: str = "local",
        history: list[dict[str, Any]] | None = None,
    ) -> TurnResult:
        """`history`: the conversation so far, if the caller kept it from the last
        turn's result; otherwise it is read from state.db."""
        emit = on_event or (lambda event: None)
        db = ctx.db
        user_write: PendingWrite | None = None
        if history is None:
            rows = await db.write(begin_turn, ctx.session_id, source, user_text)
            history = history_messages(rows)
        else:
            # Queued now and awaited with the reply's record: its commit overlaps
            # the model call, and the two often share one transaction.
            user_write = await db.submit(continue_turn, ctx.session_id, source, user_text)
        system = system_prompt(
            ctx.memory.prompt_block(), ctx.session_id, source, ctx.tz, time.time()
        )
        messages = [{"role": "system", "content": system}, *history,
                    {"role": "user", "content": user_text}]  # fmt: skip
        on_text = (lambda piece: emit(Event("text", piece))) if stream else None
        reply: ModelReply | None = None
        try:
            for calls_made in range(1, self.max_turns + 1):
                reply = await self.chain.complete(messages, self._schemas, on_text)
                earlier, user_write = user_write, None
                await self._record_reply(ctx, reply, earlier)
                messages.append(_assistant_message(reply))
                if not reply.tool_calls:
                    emit(Event("done", reply.content or ""))
                    return TurnResult(reply.content or "", calls_made, reply.provider,
                                      reply.model, messages[1:])  # fmt: skip
                for call in reply.tool_calls:
                    emit(Event("tool_call", call.arguments, call.name, call.id))
                results = await self._run_tools(reply.tool_calls, ctx)
                for call, result in zip(reply.tool_calls, results, strict=True):
                    emit(Event("tool_result", result, call.name, call.id))
                    row = NewMessage(
                        ctx.session_id, "tool", result, tool_call_id=call.id, tool_name=call.name
                    )
                    await db.write(append_message, row)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            text = f"[stopped after {self.max_turns} model calls without a final answer]"
            await db.write(append_message, NewMessage(ctx.session_id, "assistant", text))
            emit(Event("done", text))
            messages.append({"role": "assistant", "content": text})
            return TurnResult(text, self.max_turns, reply.provider, reply.model, messages[1:])
        except BaseException as exc:
            note = INTERRUPTED if _is_cancel(exc) else f"[the turn failed: {exc}]"
            with trio.CancelScope(shield=True):
                try:
                    if user_write is not None:  # the model call failed or was cancelled
                        await user_write.result()
                    await db.write(append_message, NewMessage(ctx.session_id, "system", note))
                except Exception as write_error:  # the original error matters more
                    log.error("cannot record the end of turn %s: %s", ctx.session_id, write_error)
            raise

    async def _record_reply(
        self, ctx: ToolContext, reply: ModelReply, earlier: PendingWrite | None
    ) -> None:
        """The reply is queued behind `earlier` (the user's message), then both are
        awaited: the writer commits them in that order, usually in one batch."""
        calls = [c.to_message() for c in reply.tool_calls] or None
        message = NewMessage(
            ctx.session_id, "assistant", reply.content, tool_calls=calls,
            input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
        )  # fmt: skip
        record = await ctx.db.submit(append_message, message)
        try:
            if earlier is not None:
                await earlier.result()
        except BaseException:
            record.abandon()
            raise
        await record.result()

    async def _run_tools(self, calls: tuple[ToolCall, ...], ctx: ToolContext) -> list[str]:
        results: list[str] = [""] * len(calls)

        async def one(i: int, call: ToolCall) -> None:
            results[i] = await self._call_tool(call, ctx)

        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(one, i, call)
        return results

    async def _call_tool(self, call: ToolCall, ctx: ToolContext) -> str:
        tool = self.tools.get(call.name)
        if tool is None:
            return f"error: there is no tool {call.name!r}"
        try:
            return await tool(call.parsed(), ctx)
        except (ToolError, ValueError) as exc:
            return f"error: {exc}"
        except Exception as exc:  # a tool bug is the model's problem to route around, not a crash
            log.exception("tool %s failed", call.name)
            return f"error: {type(exc).__name__}: {exc}"


def _assistant_message(reply: ModelReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [c.to_message() for c in reply.tool_calls]
    return message


def _is_cancel(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancel(e) for e in exc.exceptions)
    return False
