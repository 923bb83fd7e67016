"""Questions: a turn asks its user (the clarify tool) and waits for the answer.

The question and its prompt (the choices as buttons, each the command `/answer ID N`)
commit together; the turn then waits on the row inside its own cancel scope, bounded by
`agent.clarify_timeout`, as an approval's turn waits (the same `ApprovalWaits`). A
button, `/answer ID TEXT`, or the asker's next message in the conversation answers it;
only the user whose message started the turn, or an owner, may. `/stop`, a newer
message or a drain cancels it; what is pending when serve stops is expired at the next
start, and the resumed turn finds its question cut.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import Button
from hermes.agent.tools.base import ToolContext
from hermes.delivery.outbox import nudge
from hermes.delivery.outbox_store import drop_unsent, enqueue
from hermes.delivery.split import chunks_for
from hermes.delivery.targets import asked_at
from hermes.gateway.approvals import ApprovalWaits
from hermes.state.db import Db
from hermes.state.questions import (
    ANSWERED,
    CANCELLED,
    EXPIRED,
    PENDING,
    Question,
    end_question,
    expire_left,
    get_question,
    open_question,
)

log = logging.getLogger(__name__)


def prompt_text(question: Question) -> str:
    lines = [f"Question ({question.id}): {question.question}"]
    lines += [f"{n}. {choice}" for n, choice in enumerate(question.choices, 1)]
    how = "a button, or your own words" if question.choices else "your own words"
    return "\n".join([*lines, f"Answer with {how}."])


@attrs.define
class Questions:
    """The router's Asker (hermes/agent/tools/base.py): one for every session's turns.
    `asking`: the question each session's turn waits on, and whom it asked."""

    db: Db
    clock: Clock
    waits: ApprovalWaits
    owner: str  # the router's name in state.db: a restart expires what it left pending
    timeout: float
    asking: dict[str, tuple[str, str, str]] = attrs.Factory(dict)  # session: (id, platform, user)

    async def ask(self, ctx: ToolContext, question: str, choices: tuple[str, ...]) -> str:
        origin, caller = ctx.origin, ctx.caller
        target = asked_at(origin)

        def open_and_prompt(conn, now: float) -> Question:
            asked = open_question(
                conn,
                ctx.session_id,
                caller.platform,
                caller.user_id,
                question,
                choices,
                self.owner,
                now,
                self.timeout,
            )
            if target is not None:
                buttons = tuple(
                    Button(c, f"/answer {asked.id} {n}") for n, c in enumerate(choices, 1)
                )
                enqueue(
                    conn,
                    target,
                    chunks_for(prompt_text(asked), target.platform),
                    "notice",
                    f"question:{asked.id}",
                    now,
                    buttons=buttons,
                )
            return asked

        with trio.CancelScope(shield=True):  # a question opened is a question ended below
            asked = await self.db.write(open_and_prompt, self.clock.now())
        nudge(ctx.outbox)
        self.asking[ctx.session_id] = (asked.id, caller.platform, caller.user_id)
        try:
            with self.waits.waiting(asked.id) as woken:
                # An answer may have come before the turn listened: read, then wait.
                now = await self.db.read(get_question, asked.id)
                if now.state == PENDING and not woken.is_set():
                    with trio.move_on_after(self.timeout):
                        await woken.wait()
        except BaseException:  # /stop, a newer message, the turn cut
            await self._end(asked.id, CANCELLED)
            raise
        finally:
            self.asking.pop(ctx.session_id, None)
        ended = await self._end(asked.id, CANCELLED if self.waits.draining else EXPIRED)
        if ended.state == ANSWERED:
            return f"The user answered: {ended.answer}"
        why = "hermes is shutting down" if ended.state == CANCELLED else "no answer came"
        return f"No answer ({why}; question {ended.id}). Go on without it, or ask later."

    def waits_for(self, session_id: str, platform: str, user_id: str) -> str | None:
        """The question the session's turn waits on, if `platform:user_id` was asked it."""
        found = self.asking.get(session_id)
        return found[0] if found is not None and found[1:] == (platform, user_id) else None

    async def answer(self, qid: str, text: str, by: str, may: bool) -> str:
        """Answer question `qid` with `text` (a choice's number picks it); `may`: the one
        answering is its asker, or an owner. What they are told."""
        question = await self.db.read(get_question, qid)
        if not may:
            return f"This question is for {question.platform} user {question.user_id}."
        if question.state != PENDING:
            return f"Question {qid} was {question.state} already."
        if text.isdigit() and 1 <= int(text) <= len(question.choices):
            text = question.choices[int(text) - 1]
        ended = await self.db.write(end_question, qid, ANSWERED, self.clock.now(), text, by)
        self.waits.wake(qid)
        return f"Answered: {ended.answer}" if ended.state == ANSWERED else ended.state

    async def expire_left(self, gone: Callable[[str], bool]) -> None:
        """At the router's start: what a gone router's turns asked nobody waits on."""
        count = await self.db.write(expire_left, gone, self.clock.now())
        if count:
            log.info("%d question(s) expired: hermes restarted while they waited", count)

    async def _end(self, qid: str, state: str) -> Question:
        """Shielded: what ends the wait is often a cancel, and the row must say so; a
        prompt not sent yet is taken back."""
        with trio.CancelScope(shield=True):

            def end(conn, now: float) -> Question:
                ended = end_question(conn, qid, state, now)
                if ended.state != ANSWERED:
                    drop_unsent(conn, f"question:{qid}")
                return ended

            return await self.db.write(end, self.clock.now())
