"""One live conversation: one turn at a time; a message mid-turn interrupts, queues or
steers the running turn (hermes/gateway/intake.py decides which)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from prometheus_client import Histogram

from hermes.actors.actor import Actor
from hermes.actors.cancels import is_cancel
from hermes.adapters.contract import StepKind, TurnStep
from hermes.adapters.settings import Busy
from hermes.agent.attachments import Attachments
from hermes.agent.context import Conversation
from hermes.agent.loop import Agent, Steered
from hermes.agent.provider import ProviderError
from hermes.agent.tools.base import ToolContext
from hermes.agent.turn_times import TurnTimes
from hermes.delivery.replies import Answer
from hermes.gateway.command_table import SESSION_COMMANDS
from hermes.gateway.journal import Closings
from hermes.gateway.voice_replies import VoiceReplies
from hermes.state.messages import undo_last

log = logging.getLogger(__name__)

TURNS = Histogram(
    "hermes_turn_seconds",
    "Turns by platform and how they ended, and how long they took",
    ["platform", "outcome"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)

IDLE_TIMEOUT = 600.0


@attrs.frozen
class Turn:
    """Run `text` as a turn; its steps go to `events` (closed when the turn ends), a
    bounded channel: the turn waits while its reader is behind.
    `resume`: answer it again after a restart cut it (it is recorded already).
    `answer`: queued with the turn's final message (None: its final step carries it).
    In a chat many users share, each turn is its sender's: `ctx` says whose.
    `how`: what it does if a turn runs when it comes (`interrupt`: stops it; `queue`:
    runs after it; `steer`: joins it before its next model call, else runs next)."""

    text: str
    events: trio.MemorySendChannel[TurnStep]
    resume: bool = False
    answer: Answer | None = None
    settle: Closings | None = None  # the journal rows it answers, closed with its answer
    ctx: ToolContext | None = None  # whose turn it is (caller, memory, origin); else the session's
    media: Callable[[], Awaitable[Attachments]] | None = None  # fetches its attachments
    times: TurnTimes | None = None  # where its time goes, when it arrived just now
    untrusted: str | None = None  # why its text is not an owner's own (hermes.agent.untrusted)
    how: Busy = "interrupt"
    source: str | None = None  # the platform it came from (None: the session's own)


@attrs.frozen
class Interrupt:
    """/stop: cancel the running turn, if any."""


QUEUE_MAX = 16  # turns waiting behind the running one; more are refused, not buffered


STEERED = "added to the turn that was running; its answer answers this too"
FINAL_WAIT = 5.0  # seconds a turn's last step waits for its reader when the turn is cut


def _end(turn: Turn, why: str, kind: StepKind = StepKind.ERROR, settled: bool = False) -> None:
    """A turn that will never run: its caller waits on the events, so end them and say why
    (`interrupted` when the user meant it: /stop, or a newer message took its place).
    Nothing else was sent on them, so the one step has room."""
    with turn.events:
        try:
            turn.events.send_nowait(TurnStep(kind, why, settled=settled))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the caller has gone too


def _same_sender(one: Turn | None, other: Turn) -> bool:
    """Whether two turns are from one person (the same account, or one linked with it).
    Only the person a running turn is for steers or interrupts it: in a conversation many
    share, another's words never join or stop a turn that runs with someone else's role,
    and wait for a turn of their own."""
    mine = one.ctx if one is not None else None
    if mine is None or other.ctx is None:
        return mine is other.ctx
    a, b = mine.caller, other.ctx.caller
    return (a.platform, a.user_id) == (b.platform, b.user_id) or (
        a.person is not None and a.person == b.person
    )


def _undone(word: str, text: str | None) -> str:
    """What /undo (or a /retry with nothing to run) answers."""
    if text is None:
        return f"Nothing to {word.lstrip('/')}: no message of yours since the last compaction."
    shown = text if len(text) <= 80 else text[:77] + "..."
    return (
        f"Undone: {shown!r} and its answer are out of the conversation (the transcript keeps them)."
    )


class SessionActor(Actor):
    def __init__(
        self,
        ctx: ToolContext,
        agent: Agent,
        source: str = "local",
        idle_timeout: float = IDLE_TIMEOUT,
        voice: VoiceReplies | None = None,
    ) -> None:
        super().__init__(f"session:{ctx.session_id}")
        self.voice = voice  # reads answers aloud where the platform has voice replies
        self.ctx = ctx
        self.agent = agent
        self.busy: Busy | None = None  # `/busy` here (kept in state.db); None: config's
        self.source = source
        self.idle_timeout = idle_timeout
        self.queue: collections.deque[Turn] = collections.deque()
        self.current: trio.CancelScope | None = None
        self.running: Turn | None = None
        self.steering: list[Turn] = []  # to join the running turn at its next model call
        self.idle = trio.Event()
        self.idle.set()
        self._last_activity = 0.0  # trio.current_time() of the last message; set on start
        # What the next prompt needs (bounded by the model's budget), kept between turns
        # so a turn does not re-read it; dropped after a failed or cancelled turn.
        self.conversation: Conversation | None = None
        self.stale = False  # written to from outside (a brief's mirror): read it again

    def reload(self) -> None:
        """Its transcript gained messages it did not write: the next turn reads it."""
        self.stale = True

    async def on_start(self) -> None:
        self._last_activity = trio.current_time()
        self.nursery.start_soon(self._stop_when_idle)

    async def handle(self, msg: Any) -> Any:
        self._last_activity = trio.current_time()  # a timestamp: no task wakes per message
        if isinstance(msg, Turn):
            if self.current is None:
                self._begin(msg)
            elif len(self.queue) + len(self.steering) >= QUEUE_MAX:
                _end(msg, f"{QUEUE_MAX} messages are already waiting; send it again later")
            elif not _same_sender(self.running, msg) or msg.text.strip() in SESSION_COMMANDS:
                self.queue.append(msg)  # another's words, or a command: waits for the turn
            elif msg.how == "steer" and msg.media is None:
                self.steering.append(msg)  # a file waits for a turn of its own
            elif msg.how == "interrupt":
                self.current.cancel()  # and what the sender had waiting: this takes its place
                self._clear_queue("a newer message took its place", sent_as=msg)
                self.queue.append(msg)
            else:
                self.queue.append(msg)
            return None
        if isinstance(msg, Interrupt):
            stopped = self.current is not None
            if self.current is not None:
                self.current.cancel()
            self._clear_queue("stopped with /stop before it began")
            return stopped
        raise TypeError(f"a session cannot handle {type(msg).__name__}")

    def dropped(self, msg: Any) -> None:
        if isinstance(msg, Turn):
            _end(msg, f"{self.name} stopped before the turn began")

    def _clear_queue(self, why: str, sent_as: Turn | None = None) -> None:
        """End the turns waiting here (`sent_as`: only those of that turn's sender;
        another's still wait their turn)."""
        waiting = [*self.queue, *self.steering]
        self.queue, self.steering = collections.deque(), []
        for turn in waiting:
            if sent_as is None or _same_sender(sent_as, turn):
                _end(turn, why, StepKind.INTERRUPTED)
            else:
                self.queue.append(turn)

    def waiting(self) -> int:
        """Turns waiting here: queued, to steer the running one, or not yet read."""
        unread = self._recv.statistics().current_buffer_used if self._recv else 0
        return len(self.queue) + len(self.steering) + unread

    def busy_now(self) -> bool:
        """Whether a turn runs or waits here (a new message would be busy's to place)."""
        return self.current is not None or bool(self.queue)

    def _steered(self) -> list[Steered]:
        """The messages that joined the running turn since its last model call: their
        journal rows close with its answer, and each is told it joined."""
        turn = self.running
        if turn is None or turn.settle is None or not self.steering:
            return []
        taken, self.steering = self.steering, []
        steered = []
        for joined in taken:
            then = turn.settle.absorb(joined.settle) if joined.settle is not None else None
            steered.append(Steered(joined.text, joined.untrusted, then))
            _end(joined, STEERED, StepKind.DONE, settled=True)
        return steered

    async def finish_in_flight(self) -> None:
        await self.idle.wait()

    def _begin(self, turn: Turn) -> None:
        self.current = trio.CancelScope()
        self.running = turn
        if self.idle.is_set():  # from idle to busy; a queued turn keeps the one waited on
            self.idle = trio.Event()
        self.nursery.start_soon(self._run, turn, self.current)

    async def _run(self, turn: Turn, scope: trio.CancelScope) -> None:
        async def send(step: TurnStep) -> None:
            try:
                await turn.events.send(step)  # waits while the reader is behind
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the reader went away; the turn still finishes and is recorded

        async def send_last(step: TurnStep) -> None:
            """The final step of a turn ended by a cancel: shielded, and bounded."""
            with trio.CancelScope(shield=True), trio.move_on_after(FINAL_WAIT):
                await send(step)

        started, outcome = trio.current_time(), "ok"
        ctx = turn.ctx or self.ctx
        try:
            with scope:
                conversation, self.conversation = self.conversation, None
                if self.stale:
                    conversation, self.stale = None, False
                try:
                    # A command is queued and interrupted like a turn; its answer is its
                    # only step (None: a turn runs, /retry's with the undone message).
                    word, text, answer = turn.text.strip(), turn.text, None
                    untrusted, files = turn.untrusted, None
                    if word in ("/undo", "/retry"):
                        undone = await ctx.db.write(undo_last, ctx.session_id, ctx.clock.now())
                        conversation = None  # what the model sees changed: read it again
                        if word == "/retry" and undone is not None:
                            # asked again as it was: its words, its files, its mark
                            text, untrusted = undone.text, undone.untrusted or untrusted
                            files = Attachments.loads(undone.attachments)
                        else:
                            answer = _undone(word, undone.text if undone else None)
                    elif word in SESSION_COMMANDS:
                        conversation = conversation or await self.agent.load(ctx)
                        answer = await self._command(ctx, word, conversation)
                        self.conversation = conversation
                    if answer is not None:
                        await send(TurnStep(StepKind.TEXT, answer))
                        await send(TurnStep(StepKind.DONE, answer))
                    else:
                        if turn.media is not None:
                            files = await turn.media()
                        untrusted = untrusted or (files.untrusted() if files else None)
                        result = await self.agent.run_turn(
                            ctx,
                            text,
                            send,
                            source=turn.source or self.source,
                            conversation=conversation,
                            resume=turn.resume,
                            answer=turn.answer,
                            settle=turn.settle,
                            times=turn.times,
                            untrusted=untrusted,
                            attachments=files,
                            steered=self._steered,
                        )
                        self.conversation = result.conversation
                        if self.voice is not None and turn.answer is not None:
                            await self.voice.follow(ctx, turn.answer, result.text)
                except Exception as exc:
                    detail = self.agent.redact(str(exc))
                    log.warning("turn in %s failed: %s", self.ctx.session_id, detail)
                    line = exc.user_line if isinstance(exc, ProviderError) else detail
                    await send(TurnStep(StepKind.ERROR, line))
                    outcome = "error"
            if scope.cancelled_caught:
                await send_last(
                    TurnStep(StepKind.INTERRUPTED, "interrupted by a new message or /stop")
                )
                outcome = "interrupted"
        except BaseException as exc:  # a cancel from a tool's nursery comes as a group
            outcome = "cut"
            if is_cancel(exc):  # cut from outside (a drain, a crash): `cut`, not a user's stop
                await send_last(TurnStep(StepKind.CUT, "interrupted: hermes is shutting down"))
            raise
        finally:
            TURNS.labels(self.source, outcome).observe(trio.current_time() - started)
            turn.events.close()
            self.current = self.running = None
            self.queue.extendleft(reversed(self.steering))  # came too late: they run next
            self.steering = []
            if self.queue:
                self._begin(self.queue.popleft())
            else:
                self.idle.set()

    async def _command(self, ctx: ToolContext, command: str, conversation: Conversation) -> str:
        if command == "/compress":
            return await self.agent.compress(ctx, conversation, self.source)
        return await self.agent.usage(ctx, conversation, self.source)

    async def _stop_when_idle(self) -> None:
        while True:
            await trio.sleep_until(self._last_activity + self.idle_timeout)
            if trio.current_time() < self._last_activity + self.idle_timeout:
                continue  # a message came while it slept
            waiting = self._recv.statistics().current_buffer_used if self._recv else 0
            if not self.busy_now() and not waiting:
                self.stop()  # nothing runs, waits, or sits unread in the mailbox
                return
            self._last_activity = trio.current_time()  # mid-turn: look again a timeout later
