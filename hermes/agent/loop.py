"""The tool-call loop: model -> tools -> model ... -> final text, bounded by max_turns.

Every message is appended to state.db as it happens, so a crash mid-turn
loses nothing already said. Before each model call the conversation is fitted
to the window of the provider about to answer (hermes.agent.context).
Independent tool calls run concurrently; their results are kept in call
order. Cancelling the turn abandons the model request, kills the trees of
running commands (the terminal tool runs them in the turn's scope) and
records the interruption in the transcript.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import apsw
import attrs
import trio

from hermes.actors.cancels import is_cancel
from hermes.actors.errors import Invalid
from hermes.adapters.contract import StepKind, TurnStep
from hermes.agent.attachments import FILES, Attached, Attachments, files_of, for_model
from hermes.agent.chain import ProviderChain
from hermes.agent.context import (
    INTERRUPTED,
    Budgets,
    Compactor,
    Conversation,
    SummaryHealth,
    provider_key,
)
from hermes.agent.context_files import ContextFiles, Loaded, project_block
from hermes.agent.delegation import Delegation
from hermes.agent.mcp.servers import McpServers
from hermes.agent.permissions import COMMAND_TOOLS, Permissions
from hermes.agent.prompt import IDENTITY, SKILL_REMINDER, PromptParts, skills_index, system_prompt
from hermes.agent.provider import ModelReply, Provider, ToolCall
from hermes.agent.settings import DelegateConfig, ToolsConfig
from hermes.agent.skills.library import SkillLibrary
from hermes.agent.tools.base import ModelCalls, Tool, ToolContext, schema
from hermes.agent.tools.file_view import FileRefused, view_for
from hermes.agent.tools.todo import checklist
from hermes.agent.turn_times import TurnTimes
from hermes.agent.untrusted import CallMarks, TurnMarks
from hermes.config import Role
from hermes.delivery.outbox import nudge
from hermes.delivery.replies import Answer, Then
from hermes.state.approvals import Approval, restarted_while_waiting
from hermes.state.db import PendingWrite
from hermes.state.messages import (
    SHOWN,
    SHOWN_WHY,
    NewMessage,
    append_message,
    continue_turn,
    prompt_history,
)
from hermes.state.sessions import child_sessions, cut_children, get_session
from hermes.state.todos import todo_of

log = logging.getLogger(__name__)

INVOKED = re.compile(r"/([a-z0-9]+(?:-[a-z0-9]+)*)(?:\s|$)")  # /<skill> [text]
LOADED_SKILL_CHARS = 20_000  # a SKILL.md loaded whole into a prompt
LOADED_SKILLS_CHARS = 40_000  # every SKILL.md one prompt loads, together
SANDBOX_SKILLS = 64  # the skill directories bound into a sandboxed command, at most
READABLE_FILES = 64  # the conversation's latest files a sandboxed command may read
SUMMARIES_KEPT = 10_000  # sessions whose summary health the agent keeps (then: the failing)
NEVER_AGAIN = (*COMMAND_TOOLS, "delegate_task")  # a call cut by a restart is not run again
NOT_RUN_AGAIN = (
    "hermes restarted while a command of this turn was running; it was not run again."
    " Send your message again if you want it run."
)


def _subagents_cut(goals: list[str]) -> str:
    """What a resumed turn cut while its subagents worked says: which did not finish."""
    named = "; ".join(goals)
    return (
        f"hermes restarted while subagents worked on: {named}. They did not finish and were"
        " not run again. Send your message again if you want them run."
    )


def _not_run_again(waited: list[Approval]) -> str:
    """What a resumed turn cut in a command says: a request that waited for approval
    when hermes stopped expired, and its command never ran."""
    if not waited:
        return NOT_RUN_AGAIN
    commands = ", ".join(f"`{a.command}`" for a in waited)
    return (
        f"hermes restarted while {commands} waited for an owner's approval; the request"
        " expired and the command did not run. Send your message again if you want it run."
    )


@attrs.frozen
class Steered:
    """A message that joined a running turn (`gateway.busy: steer`, `/steer TEXT`): the
    model reads it after the tools' results, before its next call."""

    text: str
    untrusted: str | None = None
    then: Then | None = None  # the caller's write, committed with the message it joins as


@attrs.frozen
class TurnResult:
    text: str
    model_calls: int
    provider: str
    model: str
    conversation: Conversation = attrs.field(factory=Conversation, eq=False, repr=False)
    """What the next prompt needs after the turn (bounded by the budget): a caller
    that keeps it passes it back as `conversation` next time instead of a re-read."""


class Agent:
    def __init__(
        self,
        chain: ProviderChain,
        tools: dict[str, Tool],
        max_turns: int = 20,
        budgets: Budgets | None = None,
        permissions: Permissions | None = None,
        redact: Callable[[str], str] = str,
        mcp: McpServers | None = None,
        skills: SkillLibrary | None = None,
        context_files: ContextFiles | None = None,
        delegate: DelegateConfig | None = None,
    ) -> None:
        """`permissions`: which tools each role is offered (default: agent.tools's
        defaults); `redact`: applied to every tool result before the model, the
        transcript or a client sees it (serve's redactor of every secret it holds);
        `mcp`: the MCP servers' tools, offered beside `tools` by each server's roles;
        `skills`: the skills whose index each prompt holds; `context_files`: SOUL.md and
        the project files (none: the built-in identity and no project context)."""
        self.chain = chain
        self.tools = tools
        self.max_turns = max_turns
        self.budgets = budgets or Budgets()
        self._summaries: dict[str, SummaryHealth] = {}  # by session: a failing summary waits
        self.permissions = permissions or Permissions.build(ToolsConfig(), tools)
        self.redact = redact
        self.mcp = mcp
        self.skills = skills
        self.context_files = context_files or ContextFiles()
        self.delegate = delegate or DelegateConfig()  # subagents' limits
        self._offered: dict[str, tuple[list[dict[str, Any]], int]] = {}
        for role in ("owner", "user"):
            names = self.permissions.tools_for(role)
            schemas = [schema(t) for name, t in tools.items() if name in names]
            self._offered[role] = (schemas, sum(len(str(s)) for s in schemas))

    def offered(self, role: Role) -> list[str]:
        """The tools a role's sessions are offered, by name."""
        return [s["function"]["name"] for s in self._schemas(role)[0]]

    def schema_chars(self, role: Role) -> int:
        """How much of every prompt the role's tool list takes."""
        return self._schemas(role)[1]

    def _schemas(
        self, role: Role, allowed: frozenset[str] | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """The role's tools as the model sees them (the MCP servers' as they are now),
        and their size; `allowed`: a subagent's subset."""
        schemas, chars = self._offered[role]
        if self.mcp is not None:
            outside, more = self.mcp.offered(role)
            schemas, chars = (schemas + outside, chars + more) if outside else (schemas, chars)
        if allowed is None:
            return schemas, chars
        kept = [s for s in schemas if s["function"]["name"] in allowed]
        return kept, sum(len(str(s)) for s in kept)

    def compactor(self, ctx: ToolContext) -> Compactor:
        health = self._summaries.get(ctx.session_id)
        if health is None:
            if len(self._summaries) >= SUMMARIES_KEPT:  # months of sessions: keep the failing
                self._summaries = {k: v for k, v in self._summaries.items() if v.failures}
            health = self._summaries[ctx.session_id] = SummaryHealth()
        return Compactor(
            self.budgets, ctx.db, ctx.session_id, ctx.terminal.options.spill_dir, ctx.clock, health
        )

    async def system(self, ctx: ToolContext, source: str, parts: PromptParts | None = None) -> str:
        """The system prompt of `ctx`'s next model call, from its named parts (`parts`, or
        read now in a thread: files are read and scanned)."""
        if parts is None:
            parts = await trio.to_thread.run_sync(self._parts, ctx)
        todo = await ctx.db.read(todo_of, ctx.session_id)
        if todo:  # a long task's checklist, as the model left it (a resumed turn too)
            parts = attrs.evolve(
                parts, todo=f"## Your todo list for this session\n{checklist(todo)}"
            )
        return system_prompt(parts, ctx.session_id, source, ctx.tz, ctx.clock.now())

    def _read_files(
        self, ctx: ToolContext, named: tuple[str, ...], invoked: tuple[str, ...]
    ) -> tuple[tuple[Path, ...], PromptParts, str]:
        """A turn's first reads (a thread's): its skill directories, the prompt's parts,
        the skills it loads."""
        return (
            tuple(self.skill_directories(ctx)),
            self._parts(ctx),
            self.loaded_skills(ctx, named, invoked),
        )

    def _parts(self, ctx: ToolContext) -> PromptParts:
        return PromptParts(
            self.context_files.persona(IDENTITY),
            ctx.memory.prompt_block(),
            self._skills_part(ctx),
            project_block(self._project_files(ctx)),
        )

    def _project_files(self, ctx: ToolContext) -> list[Loaded]:
        """The project files of where `ctx`'s commands start and where its shell was left,
        each only if what was opened is a file this caller's commands could read (the
        file tools' view): a link to a secret, or a directory link out of a sandboxed
        session, leads nowhere. None over ssh: the files are on the other machine."""
        try:
            view = view_for(ctx)
        except FileRefused:
            return []
        placement = ctx.terminal.backends.place(ctx.caller.role, ctx.untrusted)
        start = ctx.terminal.own if placement.confined or placement.ask else ctx.terminal.workdir
        return self.context_files.project(dict.fromkeys([start, view.base]), view.holds)

    def _has_skills(self, role: Role) -> bool:
        """Whether `role` has skills here (a library, and skill_view to open them)."""
        return self.skills is not None and "skill_view" in self.permissions.tools_for(role)

    def _skills_part(self, ctx: ToolContext) -> str:
        if not self._has_skills(ctx.caller.role):
            return ""
        return skills_index(self.skills.available(ctx.caller), self.skills.config.index_chars)

    def loaded_skills(
        self, ctx: ToolContext, named: tuple[str, ...], invoked: tuple[str, ...]
    ) -> str:
        """The SKILL.md of each skill `named` (a cron job's) or `invoked` (a message's
        `/<name>`) that `ctx`'s caller has, for the prompt. One named that they cannot
        have is said; an invoked name that is no skill of theirs was only text."""
        if not self._has_skills(ctx.caller.role):
            if not named:
                return ""
            return (
                f"## The skills {', '.join(named)} cannot be loaded\nskills are not among"
                f" the tools of a {ctx.caller.role} here (agent.tools)"
            )
        parts: list[str] = []
        room = LOADED_SKILLS_CHARS
        for name in dict.fromkeys((*named, *invoked)):
            try:
                skill = self.skills.find(ctx.caller, name)
                body = self.skills.read(skill).decode("utf-8", errors="replace")
            except Invalid as exc:
                if name in named:
                    parts.append(f"## The skill {name} cannot be loaded\n{exc}")
                continue
            keep = min(LOADED_SKILL_CHARS, room)
            if len(body) > keep:
                body = f"{body[:keep]}\n[cut; skill_view {name} has the rest]"
            room -= len(body)
            parts.append(
                f"## The skill {name} (at {skill.directory}), loaded for this"
                f" request: follow it\n{body}"
            )
        return "\n\n".join(parts)

    def skill_directories(self, ctx: ToolContext) -> tuple[Path, ...]:
        """The directories of the skills `ctx`'s caller has: a sandboxed command of theirs
        may read (and run) them, read-only, where skill_view says they are."""
        if not self._has_skills(ctx.caller.role):
            return ()
        return tuple(s.directory for s in self.skills.available(ctx.caller)[:SANDBOX_SKILLS])

    def _remind_after(self, role: Role) -> int:
        """Tool calls in one turn before its prompt reminds the model, once, that it may
        save what it learned as a skill (never, where the role cannot write skills)."""
        if self.skills is None or "skill_manage" not in self.permissions.tools_for(role):
            return 1 << 30
        return self.skills.config.remind_after

    async def load(self, ctx: ToolContext) -> Conversation:
        """What the next prompt of the session needs, from state.db."""
        return Conversation.from_history(await ctx.db.read(prompt_history, ctx.session_id))

    async def compress(self, ctx: ToolContext, conversation: Conversation, source: str) -> str:
        """/compress: summarize every turn but the last few now; says what it did."""
        provider = self.chain.starting_with(ctx.model).providers[0]
        chars = self.schema_chars(ctx.caller.role)
        done = await self.compactor(ctx).compact(
            conversation, await self.system(ctx, source), chars, provider, force=True
        )
        return done.describe()

    async def usage(self, ctx: ToolContext, conversation: Conversation, source: str) -> str:
        """/usage: the next prompt's estimated size against the budget, and the tokens
        the session has used."""
        provider = self.chain.starting_with(ctx.model).providers[0]
        prompt = conversation.prompt(await self.system(ctx, source))
        size = self.budgets.estimate(prompt, self.schema_chars(ctx.caller.role), provider)
        window = provider.context_tokens
        session = await ctx.db.read(get_session, ctx.session_id)
        used_in, used_out = (session.input_tokens, session.output_tokens) if session else (0, 0)
        subagents = await ctx.db.read(child_sessions, ctx.session_id)
        text = (
            f"next prompt about {size} tokens of {window} ({100 * size / window:.0f}%) for "
            f"{provider.name}/{provider.model}; compacts past {self.budgets.threshold(provider)}"
            f"; this session used {used_in} input and {used_out} output tokens"
        )
        if subagents:
            sub_in = sum(s.input_tokens for s in subagents)
            sub_out = sum(s.output_tokens for s in subagents)
            text += (
                f", and its {len(subagents)} subagents {sub_in} input and {sub_out} output tokens"
            )
        return text

    async def run_turn(
        self,
        ctx: ToolContext,
        user_text: str,
        on_step: Callable[[TurnStep], Awaitable[None]] | None = None,
        stream: bool = True,
        source: str = "local",
        conversation: Conversation | None = None,
        resume: bool = False,
        answer: Answer | None = None,
        times: TurnTimes | None = None,
        settle: Then | None = None,
        untrusted: str | None = None,
        attachments: Attachments | None = None,
        skills: tuple[str, ...] = (),
        steered: Callable[[], list[Steered]] | None = None,
    ) -> TurnResult:
        """`conversation`: what the last turn's result kept, if the caller kept it;
        otherwise what the prompt needs is read from state.db (the latest compaction
        and the messages after it). `resume`: answer `user_text` again after a restart
        cut its turn; it is not recorded twice if it was recorded already. `answer`:
        where the final text goes, queued in the outbox with the message holding it.
        `on_step` gets each step as it happens and is awaited: a slow consumer holds
        the turn back (the model's stream included) rather than piling steps up.
        `times`: marked with the model's and the tools' spans. `settle`: the caller's
        write, committed with the final message (its DONE step then says `settled`).
        `untrusted`: why `user_text` is not from an owner's hands (a user's message, a
        mail), recorded with it; the turn's marks start from what the conversation holds
        (hermes.agent.untrusted). `attachments`: the message's files, recorded with it as
        data (hermes.agent.attachments), rendered only for the model. `skills`: skills
        loaded into this turn's prompt (a cron job's); a message `/<skill> ...` loads that
        one too. `steered`: asked after each round of tools for messages that joined the
        turn; each is recorded as the user's, in the conversation the next call sees."""
        times = times or TurnTimes(0.0)

        async def emit(step: TurnStep) -> None:
            if on_step is not None:
                await on_step(step)

        db = ctx.db
        user_write: PendingWrite | None = None
        user_message: dict[str, Any] = {"role": "user", "content": user_text}
        files = attachments.dumps() if attachments else None
        if attachments:
            user_message[FILES] = attachments
        if resume:
            conversation = await self.load(ctx)
            done = _answered(conversation, user_text)
            if done is not None:  # cut after its answer was recorded (and queued with it)
                await emit(TurnStep(StepKind.DONE, done))
                return TurnResult(done, 0, "", "", conversation)
            cut = _cut_in_a_command(conversation, user_text)
            if cut:  # never run it again unasked
                told = _not_run_again(await db.read(restarted_while_waiting, ctx.session_id, cut))
                unfinished = await db.write(cut_children, ctx.session_id, ctx.clock.now())
                if unfinished:  # subagents were at work: named, and not run again
                    told = _subagents_cut(unfinished)
                said = NewMessage(ctx.session_id, "assistant", told, timestamp=ctx.clock.now())
                row_id = await db.write(append_answered, said, answer, settle)
                nudge(ctx.outbox)
                conversation.add({"role": "assistant", "content": told}, row_id)
                await emit(TurnStep(StepKind.DONE, told, settled=settle is not None))
                return TurnResult(told, 0, "", "", conversation)
            if not _asked(conversation, user_text):  # cut before it began: ask it now
                user_write = await db.submit(
                    continue_turn,
                    ctx.session_id,
                    source,
                    user_text,
                    ctx.clock.now(),
                    untrusted,
                    files,
                )
                conversation.add(user_message, None, untrusted)
        else:
            if conversation is None:  # read before the message is queued: it is not in it
                conversation = await self.load(ctx)
            # Queued now and awaited with the reply's record: its commit overlaps the
            # model call (the journal's row, committed at admission, is the turn's only
            # commit before it).
            user_write = await db.submit(
                continue_turn, ctx.session_id, source, user_text, ctx.clock.now(), untrusted, files
            )
            conversation.add(user_message, None, untrusted)
        ctx = attrs.evolve(ctx, marks=TurnMarks(conversation.untrusted), skills=self.skills)
        cache = ctx.files.cache.resolve() if ctx.files is not None else None
        media = [p for p in files_of(conversation.messages) if cache and p.is_relative_to(cache)]
        # The files a turn starts from (its skills, the prompt's parts), read in one hop.
        skills_here, parts, loaded = await trio.to_thread.run_sync(
            self._read_files, ctx, skills, invoked_skill(user_text)
        )
        ctx.terminal.readable = (*media[-READABLE_FILES:], *skills_here)
        system = await self.system(ctx, source, parts)
        if loaded:
            system = f"{system}\n\n{loaded}"
        remind = self._remind_after(ctx.caller.role)
        compactor = self.compactor(ctx)
        chain = self.chain.starting_with(ctx.model)  # a smaller window: fit compacts for it
        sent: dict[str, int] = {}
        allowed = ctx.allowed
        if ctx.asker is None:  # nobody to ask (a cron fire, a subagent): no clarify
            allowed = (allowed or frozenset(self.offered(ctx.caller.role))) - {"clarify"}
        schemas, schema_chars = self._schemas(ctx.caller.role, allowed)
        offered = frozenset(s["function"]["name"] for s in schemas)
        delegation = Delegation(self.run_turn, self.delegate, offered)
        calls = ctx.calls if ctx.calls is not None else ModelCalls(self.max_turns)
        ctx = attrs.evolve(ctx, progress=emit, delegation=delegation, calls=calls)

        async def prepare(provider: Provider) -> list[dict[str, Any]]:
            chars = await compactor.fit(conversation, system, schema_chars, provider)
            sent[provider_key(provider.name, provider.model)] = chars + schema_chars
            cache = ctx.files.cache if ctx.files is not None else None
            prompt = await for_model(conversation.prompt(system), provider.image_px, cache)
            times.wait_begins()  # the request goes now
            return prompt

        async def on_text(piece: str) -> None:
            await emit(TurnStep(StepKind.TEXT, piece))

        reply: ModelReply | None = None
        result: TurnResult | None = None
        try:
            for calls_made in range(1, self.max_turns + 1):
                if not calls.take():
                    break  # the turn's budget is spent (its subagents' calls count in it)
                reply = await chain.complete(prepare, schemas, on_text if stream else None)
                times.wait_ends()  # its last byte came
                key = provider_key(reply.provider, reply.model)
                self.budgets.calibrate(key, sent.get(key, 0), reply.input_tokens)
                earlier, user_write = user_write, None
                final = not reply.tool_calls
                reply_id, user_id = await self._record_reply(
                    ctx, reply, earlier, answer if final else None, settle if final else None
                )
                if user_id is not None:
                    conversation.ids[_index_of(conversation, user_message)] = user_id
                conversation.add(_assistant_message(reply), reply_id)
                if not reply.tool_calls:
                    result = TurnResult(
                        reply.content or "", calls_made, reply.provider, reply.model, conversation
                    )
                    break
                for call in reply.tool_calls:
                    await emit(TurnStep(StepKind.TOOL_CALL, call.arguments, call.name, call.id))
                times.wait_begins()
                results = await self._run_tools(reply.tool_calls, ctx)
                times.wait_ends()
                remind -= len(reply.tool_calls)
                if remind <= 0 < remind + len(reply.tool_calls):  # once, as it crosses
                    system = f"{system}\n\n{SKILL_REMINDER}"
                for call, (output, marks) in zip(reply.tool_calls, results, strict=True):
                    row = NewMessage(
                        ctx.session_id,
                        "tool",
                        output,
                        tool_call_id=call.id,
                        tool_name=call.name,
                        timestamp=ctx.clock.now(),
                        untrusted=marks.untrusted,
                    )
                    row_id = await db.write(append_message, row)
                    conversation.add(
                        {"role": "tool", "tool_call_id": call.id, "content": output},
                        row_id,
                        marks.untrusted,
                    )
                    await emit(
                        TurnStep(StepKind.TOOL_RESULT, output, call.name, call.id, note=marks.note)
                    )
                shown = [image for _, marks in results for image in marks.shown]
                if shown:  # images a tool showed: a message of their own, for the model
                    files = Attachments(tuple(Attached(image) for image in shown))
                    said = NewMessage(
                        ctx.session_id,
                        "user",
                        SHOWN,
                        timestamp=ctx.clock.now(),
                        untrusted=SHOWN_WHY,
                        attachments=files.dumps(),
                    )
                    row_id = await db.write(append_message, said)
                    shown_message = {"role": "user", "content": SHOWN, FILES: files}
                    conversation.add(shown_message, row_id, SHOWN_WHY)
                for extra in steered() if steered is not None else ():
                    now = ctx.clock.now()
                    said = NewMessage(
                        ctx.session_id, "user", extra.text, timestamp=now, untrusted=extra.untrusted
                    )
                    row_id = await db.write(append_answered, said, None, extra.then)
                    message = {"role": "user", "content": extra.text}
                    conversation.add(message, row_id, extra.untrusted)
                    if extra.untrusted is not None:  # its later commands run as marked
                        ctx.marks.took_in(extra.untrusted)
            if result is None:
                text = f"[stopped after {self.max_turns} model calls without a final answer]"
                said = NewMessage(ctx.session_id, "assistant", text, timestamp=ctx.clock.now())
                row_id = await db.write(append_answered, said, answer, settle)
                nudge(ctx.outbox)
                conversation.add({"role": "assistant", "content": text}, row_id)
                provider, model = (reply.provider, reply.model) if reply else ("", "")
                result = TurnResult(text, self.max_turns, provider, model, conversation)
        except BaseException as exc:
            note = INTERRUPTED if is_cancel(exc) else self.redact(f"[the turn failed: {exc}]")
            with trio.CancelScope(shield=True):
                try:
                    if user_write is not None:  # the model call failed or was cancelled
                        await user_write.result()
                    said = NewMessage(ctx.session_id, "system", note, timestamp=ctx.clock.now())
                    await db.write(append_message, said)
                except Exception as write_error:  # the original error matters more
                    log.error("cannot record the end of turn %s: %s", ctx.session_id, write_error)
            raise
        # Recorded (and queued) already: a cancel while the step waits for its consumer
        # must not record an interruption after the answer.
        await emit(TurnStep(StepKind.DONE, result.text, settled=settle is not None))
        return result

    async def _record_reply(
        self,
        ctx: ToolContext,
        reply: ModelReply,
        earlier: PendingWrite | None,
        answer: Answer | None,
        settle: Then | None,
    ) -> tuple[int, int | None]:
        """The reply is queued behind `earlier` (the user's message), then both are
        awaited: the writer commits them in that order, usually in one batch. A final
        reply's `answer` rows and its `settle` go in with it. Returns their row ids (the
        reply's, and the user message's if it was queued)."""
        calls = [c.to_message() for c in reply.tool_calls] or None
        message = NewMessage(
            ctx.session_id,
            "assistant",
            reply.content,
            tool_calls=calls,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            timestamp=ctx.clock.now(),
        )
        record = await ctx.db.submit(append_answered, message, answer, settle)
        user_id = None
        try:
            if earlier is not None:
                user_id = await earlier.result()
        except BaseException:
            record.abandon()
            raise
        reply_id = await record.result()
        if answer is not None:
            nudge(ctx.outbox)
        return reply_id, user_id

    async def _run_tools(
        self, calls: tuple[ToolCall, ...], ctx: ToolContext
    ) -> list[tuple[str, CallMarks]]:
        """Each call's result and what it marked (the text it brought in, its note), in
        call order."""
        results = [("", CallMarks(ctx.marks)) for _ in calls]

        async def one(i: int, call: ToolCall) -> None:
            marks = results[i][1]
            results[i] = (await self._call_tool(call, attrs.evolve(ctx, call=marks)), marks)

        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(one, i, call)
        return results

    async def _call_tool(self, call: ToolCall, ctx: ToolContext) -> str:
        """The call's result, redacted: nothing a secret-holding tool printed reaches the
        model, the transcript or a client. A tool the caller's role may not call is
        refused before anything runs."""
        return self.redact(await self._result_of(call, ctx))

    async def _result_of(self, call: ToolCall, ctx: ToolContext) -> str:
        tool: Tool | None = self.tools.get(call.name)
        grants = None
        if tool is None and self.mcp is not None:
            tool = self.mcp.tool(call.name)
            grants = None if tool is None else tool.roles
        if tool is None:
            return f"error: there is no tool {call.name!r}"
        refusal = self.permissions.refusal(ctx.caller.role, call.name, grants)
        if refusal is None and ctx.allowed is not None and call.name not in ctx.allowed:
            refusal = f"the {call.name} tool is not one this subagent was given"
        if refusal is not None:
            return f"error: {refusal}"
        try:
            return await tool(call.parsed(), attrs.evolve(ctx, call_id=call.id))
        except (Invalid, ValueError) as exc:  # the call is wrong (ValueError: its JSON)
            return f"error: {exc}"
        except Exception as exc:  # a tool bug is the model's problem to route around, not a crash
            log.exception("tool %s failed", call.name)
            return f"error: {type(exc).__name__}: {exc}"


def invoked_skill(text: str) -> tuple[str, ...]:
    """The skill a message `/<name> ...` names (as a name; whether it is one is for the
    library to say)."""
    found = INVOKED.match(text)
    return (found.group(1),) if found else ()


def append_answered(
    conn: apsw.Connection,
    message: NewMessage,
    answer: Answer | None,
    settle: Then | None = None,
) -> int:
    """The assistant's message and, for a final one, its answer's outbox rows (queued
    at the message's time) and the caller's `settle`: one transaction."""
    row_id = append_message(conn, message)
    if answer is not None and message.content:
        answer.queue(conn, message.content, message.timestamp)
    if settle is not None:
        settle(conn, message.timestamp)
    return row_id


def _assistant_message(reply: ModelReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [c.to_message() for c in reply.tool_calls]
    return message


def _answered(conversation: Conversation, text: str) -> str | None:
    """The final answer recorded after the last user message, if that message is `text`
    (a turn cut between its answer and the end of its journal row)."""
    messages = conversation.messages
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users or messages[users[-1]].get("content") != text or users[-1] == len(messages) - 1:
        return None
    last = messages[-1]
    if last["role"] != "assistant" or last.get("tool_calls") or not last.get("content"):
        return None
    return last["content"]


def _cut_in_a_command(conversation: Conversation, text: str) -> list[str]:
    """The calls of the turn asking `text` that were cut while they ran and are never run
    again unasked (a terminal, process or delegate_task call after it has no recorded
    result): their call ids. The
    transcript records the call before it runs, so this holds across a crash, where
    nothing else could be written."""
    messages = conversation.messages
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users or messages[users[-1]].get("content") != text:
        return []
    commands = {
        call["id"]
        for m in messages[users[-1] :]
        for call in m.get("tool_calls") or ()
        if call["function"]["name"] in NEVER_AGAIN
    }
    return [
        m["tool_call_id"]
        for m in messages[users[-1] :]
        if m["role"] == "tool" and m.get("tool_call_id") in commands and m["content"] == INTERRUPTED
    ]


def _asked(conversation: Conversation, text: str) -> bool:
    """Whether the conversation's last user message is `text` (recorded already)."""
    for message in reversed(conversation.messages):
        if message["role"] == "user":
            return message.get("content") == text
    return False


def _index_of(conversation: Conversation, message: dict[str, Any]) -> int:
    """Where `message` is now (compaction may have removed what came before it)."""
    return next(i for i, m in enumerate(conversation.messages) if m is message)
