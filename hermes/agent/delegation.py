"""Subagents: the tasks of one `delegate_task` call, each run as a turn of its own in the
calling tool's nursery, so `/stop`, an interrupt, a drain and a crash end them with their
parent.

A subagent's turn has its own conversation (a child session linked to the parent's,
holding the goal and the context it was given, never the parent's history), its
parent's role and sandbox rules, and a subset of its parent's tools: never
`send_message` (it has nobody to talk to), and `delegate_task` only above
`agent.delegate.max_depth`. At most `max_parallel` run at once for a turn and
`max_total` start in all; each is stopped after `timeout`. The parent gets what each
came to (its answer, capped, or why not: failed, timed out), never an exception; the
child session's `end_reason` says the same, `cancelled` when its parent was.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from hermes.adapters.contract import StepKind, TurnStep
from hermes.agent.settings import DelegateConfig
from hermes.agent.tools.base import ToolContext, ToolError
from hermes.agent.untrusted import TurnMarks
from hermes.state.sessions import NewSession, end_session, ensure_session

log = logging.getLogger(__name__)

NOT_FOR_CHILDREN = frozenset({"send_message", "clarify"})  # they have nobody to talk to
DELEGATE = "delegate_task"
MAX_GOAL, MAX_CONTEXT = 2_000, 20_000  # characters
BRIEF = (
    "You are a subagent: another agent gave you one task. Do it with the tools you have and"
    " answer with what you found or did, completely and briefly: your answer is all the"
    " other agent sees."
)


@attrs.frozen
class Task:
    goal: str
    context: str = ""
    tools: tuple[str, ...] | None = None  # None: every tool the subagent may have


@attrs.frozen
class Outcome:
    status: str  # done, failed, timed out, cancelled
    text: str  # the answer, or why not


def tasks_of(args: dict[str, Any]) -> list[Task]:
    """The call's tasks: `tasks` (a list of {goal, context, tools}), or one task given as
    `goal`, `context`, `tools`."""
    raw = args.get("tasks")
    if raw is None:
        raw = [{k: args[k] for k in ("goal", "context", "tools") if k in args}]
    if not isinstance(raw, list) or not raw:
        raise ToolError("tasks must be a non-empty list of {goal, context, tools}")
    tasks = []
    for n, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise ToolError(f"task {n}: expected an object with a goal")
        goal, context = item.get("goal"), item.get("context") or ""
        if not isinstance(goal, str) or not goal.strip():
            raise ToolError(f"task {n}: its goal is missing")
        if len(goal) > MAX_GOAL or not isinstance(context, str) or len(context) > MAX_CONTEXT:
            raise ToolError(
                f"task {n}: a goal is at most {MAX_GOAL} characters and its"
                f" context at most {MAX_CONTEXT}"
            )
        tools = item.get("tools")
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools)
        ):
            raise ToolError(f"task {n}: tools must be a list of tool names")
        tasks.append(Task(goal.strip(), context, tuple(tools) if tools is not None else None))
    return tasks


class Delegation:
    """One turn's subagents: its limits, and how many it started."""

    def __init__(
        self,
        run_turn: Callable[..., Awaitable[Any]],
        config: DelegateConfig,
        offered: frozenset[str],
    ) -> None:
        """`run_turn`: the agent's (a subagent's turn is a turn); `offered`: the tools the
        parent turn has."""
        self.run_turn = run_turn
        self.config = config
        self.offered = offered
        self.started = 0
        self.places = trio.CapacityLimiter(config.max_parallel)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        if ctx.depth >= self.config.max_depth:
            raise ToolError(
                f"a subagent may not delegate again (agent.delegate.max_depth:"
                f" {self.config.max_depth})"
            )
        tasks = tasks_of(args)
        if len(tasks) > self.config.max_total:
            raise ToolError(
                f"at most {self.config.max_total} tasks a turn (agent.delegate.max_total)"
            )
        outcomes: list[Outcome] = [Outcome("failed", "not started")] * len(tasks)

        async def one(n: int, task: Task, tools: frozenset[str], place: object) -> None:
            try:
                outcomes[n] = await self._child(ctx, n + 1, task, tools)
            finally:
                self.places.release_on_behalf_of(place)

        kept = ctx.terminal.readable  # each subagent's turn sets its own on the shared shell
        try:
            async with trio.open_nursery() as nursery:
                for n, task in enumerate(tasks):
                    tools = self._admitted(ctx, task)
                    if isinstance(tools, Outcome):
                        outcomes[n] = tools
                        continue
                    # Places are taken here, in the tasks' order: the first tasks start
                    # first, and a cancel here starts nothing more.
                    place = object()
                    await self.places.acquire_on_behalf_of(place)
                    nursery.start_soon(one, n, task, tools, place)
        finally:
            ctx.terminal.readable = kept
        return "\n\n".join(
            f"Task {n} ({o.status}): {t.goal}\n{o.text}"
            for n, (t, o) in enumerate(zip(tasks, outcomes, strict=True), 1)
        )

    def tools_for(self, ctx: ToolContext, task: Task) -> frozenset[str] | str:
        """The subagent's tools, or why the task asks for one it may not have."""
        mine = self.offered - NOT_FOR_CHILDREN
        if ctx.depth + 1 >= self.config.max_depth:
            mine -= {DELEGATE}
        if task.tools is None:
            return mine
        wanted = frozenset(task.tools)
        if not wanted <= mine:
            names = ", ".join(sorted(wanted - mine))
            return f"refused: not tools a subagent of this turn may have: {names}"
        return wanted

    def _admitted(self, ctx: ToolContext, task: Task) -> frozenset[str] | Outcome:
        """The subagent's tools, counted as started; or the outcome of a task refused."""
        tools = self.tools_for(ctx, task)
        if isinstance(tools, str):
            return Outcome("failed", tools)
        if self.started >= self.config.max_total:
            limit = self.config.max_total
            return Outcome(
                "failed",
                f"refused: this turn started {limit} subagents already (agent.delegate.max_total)",
            )
        self.started += 1
        return tools

    async def _child(self, ctx: ToolContext, n: int, task: Task, tools: frozenset[str]) -> Outcome:
        line = f"{DELEGATE}: {task.goal[:40]}{'…' if len(task.goal) > 40 else ''}"
        call_id = f"{ctx.call_id or 'delegate'}/{n}"
        child = f"{ctx.session_id}.sub{n}.{secrets.token_hex(2)}"
        now = ctx.clock.now()
        await ctx.db.write(
            ensure_session,
            NewSession(
                child,
                source="delegate",
                parent_session_id=ctx.session_id,
                user_id=ctx.caller.user_id,
                title=task.goal[:80],
                title_source="derived",
                started_at=now,
            ),
        )
        await self._show(ctx, TurnStep(StepKind.TOOL_CALL, task.goal, line, call_id))
        outcome = Outcome("cancelled", "its parent was stopped")
        sub = attrs.evolve(
            ctx,
            session_id=child,
            depth=ctx.depth + 1,
            allowed=tools,
            call=None,
            call_id=None,
            marks=TurnMarks(ctx.marks.untrusted),
            delegation=None,
            progress=None,
        )
        text = f"{BRIEF}\n\nYour task: {task.goal}"
        if task.context:
            text += f"\n\nWhat you are given to work with:\n{task.context}"
        try:
            with trio.move_on_after(self.config.timeout) as limit:
                result = await self.run_turn(
                    sub, text, stream=False, source="delegate", untrusted=ctx.untrusted
                )
                outcome = Outcome("done", self._capped(result.text))
            if limit.cancelled_caught:
                outcome = Outcome("timed out", f"stopped after {self.config.timeout:g} s")
        except Exception as exc:  # the parent hears why; it never gets an exception
            log.info("subagent %s failed: %s", child, exc)
            outcome = Outcome("failed", str(exc) or type(exc).__name__)
        finally:
            with trio.CancelScope(shield=True):
                await ctx.db.write(end_session, child, outcome.status, ctx.clock.now())
                await self._show(ctx, TurnStep(StepKind.TOOL_RESULT, outcome.text, line, call_id))
        return outcome

    def _capped(self, text: str) -> str:
        cap = self.config.answer_chars
        if len(text) <= cap:
            return text
        return f"{text[:cap]}\n[cut: {len(text) - cap} more characters]"

    async def _show(self, ctx: ToolContext, step: TurnStep) -> None:
        if ctx.progress is not None:
            with trio.move_on_after(5):  # a line of progress never holds the work back
                await ctx.progress(step)
