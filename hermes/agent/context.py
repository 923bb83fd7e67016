"""Long conversations: what the next prompt needs, kept under each model's context budget.

Sessions never reset by time, so a DM with the agent grows for weeks. Before
each model call the prompt is measured against the window of the provider
about to answer (its `context_tokens`); past `compact_at` of it, the
conversation is compacted in steps until it fits again:

1. old tool outputs (outside the last `keep_turns` turns) are cut to a head
   and a tail, with the path of a file that keeps them whole;
2. the oldest turns (never the last `keep_turns`, never half a tool-call
   exchange: whole turns only) are replaced by a summary the model writes
   through a fixed prompt, stored in state.db as a compaction record naming
   the messages it covers, so a restarted serve continues from it; if the
   summary call fails or times out, the turns are dropped with a visible
   marker instead (the user's turn never fails because history is long);
3. if the turns kept are still too big, every tool output is cut harder,
   then every turn but the current one is summarized, then long messages
   (never the user's current one) are cut to a head and a tail.

The transcript keeps every message; only the prompt is compacted. A
session actor holds a Conversation, which is therefore bounded by the budget.
Sizes are estimated from characters, calibrated per provider by the
`prompt_tokens` it reports; no tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.actors.backoff import Backoff
from hermes.actors.clock import Clock
from hermes.agent.attachments import FILES, Attachments
from hermes.agent.provider import Provider
from hermes.state.db import Db
from hermes.state.messages import Compaction, PromptHistory, add_compaction
from hermes.state.rows import MessageRow

log = logging.getLogger(__name__)

INTERRUPTED = "[interrupted: the turn was cancelled before it finished]"
COMPACTION_PROMPT = (
    "You are compacting a long conversation so it can continue within a limited context. "
    "Write a concise summary of the conversation below for your own later use: facts about "
    "the user, decisions made, tasks done and still open, names, numbers, file paths and "
    "commands that matter. Keep the language of the conversation. Answer with the summary only."
)
SUMMARY_HEADING = "Summary of the earlier conversation (compacted to fit the context window):"
CHARS_PER_TOKEN = 4.0  # until a provider's own reports calibrate it
MESSAGE_OVERHEAD = 4  # tokens a message costs beyond its text (role, separators)
TOOL_HEAD, TOOL_TAIL = 600, 400  # what is kept of a cut tool output
TOOL_HEAD_HARD, TOOL_TAIL_HARD = 200, 100
SUMMARY_TIMEOUT = 120.0
SUMMARY_SHARE = 0.5  # of the window, for what the summary call is given to read
TARGET_SHARE = 0.6  # of the threshold: compaction leaves room for the next turns


@attrs.define
class Conversation:
    """What the next prompt needs: the summary of what was compacted, then the
    messages after it, each with its transcript row id (None: not committed yet) and why
    its text is untrusted (None: it is an owner's; hermes.agent.untrusted)."""

    summary: str | None = None
    messages: list[dict[str, Any]] = attrs.Factory(list)
    ids: list[int | None] = attrs.Factory(list)
    marks: list[str | None] = attrs.Factory(list)
    summary_untrusted: str | None = None  # the summary was written from untrusted text

    def add(
        self, message: dict[str, Any], row_id: int | None = None, untrusted: str | None = None
    ) -> None:
        self.messages.append(message)
        self.ids.append(row_id)
        self.marks.append(untrusted)

    @property
    def untrusted(self) -> str | None:
        """Why what the next prompt holds has text from outside an owner's hands (None:
        it has none): its summary's mark, else the first message's that has one."""
        return self.summary_untrusted or next((m for m in self.marks if m), None)

    def prompt(self, system: str) -> list[dict[str, Any]]:
        head = [{"role": "system", "content": system}]
        if self.summary:
            head.append({"role": "system", "content": f"{SUMMARY_HEADING}\n{self.summary}"})
        return head + self.messages

    def chars(self) -> int:
        """What it holds, in characters (the session actor's retained size)."""
        return len(self.summary or "") + prompt_chars(self.messages)

    def turn_starts(self) -> list[int]:
        """Indexes of the messages that begin a turn (a user message)."""
        return [i for i, m in enumerate(self.messages) if m["role"] == "user"]

    @classmethod
    def from_history(cls, history: PromptHistory) -> Conversation:
        compaction = history.compaction
        conversation = cls(
            summary=compaction.summary if compaction else None,
            summary_untrusted=compaction.untrusted if compaction else None,
        )
        for message, row_id, untrusted in history_messages(history.rows):
            conversation.add(message, row_id, untrusted)
        return conversation


def history_messages(
    rows: Sequence[MessageRow],
) -> list[tuple[dict[str, Any], int | None, str | None]]:
    """The transcript as chat messages with their row ids and untrusted marks; a tool call
    left without a result (an interrupted turn) gets one, so the provider accepts the
    history."""
    out: list[tuple[dict[str, Any], int | None, str | None]] = []
    pending: list[str] = []

    def close_pending() -> None:
        for call_id in pending:
            cut = {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
            out.append((cut, None, None))
        pending.clear()

    for row in rows:
        if row.role == "tool":
            if row.tool_call_id in pending:
                pending.remove(row.tool_call_id)
                message = {
                    "role": "tool",
                    "tool_call_id": row.tool_call_id,
                    "content": row.content or "",
                }
                out.append((message, row.id, row.untrusted))
            continue
        close_pending()
        message: dict[str, Any] = {"role": row.role, "content": row.content or ""}
        if row.attachments:
            message[FILES] = Attachments.loads(row.attachments)
        if row.role == "assistant" and row.tool_calls:
            calls = json.loads(row.tool_calls)
            message["tool_calls"] = calls
            message["content"] = row.content
            pending.extend(c["id"] for c in calls)
        out.append((message, row.id, row.untrusted))
    close_pending()
    return out


def _message_chars(message: dict[str, Any]) -> int:
    size = len(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        size += len(call["function"]["arguments"]) + len(call["function"]["name"]) + 20
    return size


class Budgets:
    """Each provider's window, and its characters per token as it reports them."""

    def __init__(self, compact_at: float = 0.75, keep_turns: int = 4) -> None:
        self.compact_at = compact_at
        self.keep_turns = keep_turns
        self._chars_per_token: dict[str, float] = {}

    def chars_per_token(self, provider: Provider) -> float:
        return self._chars_per_token.get(
            provider_key(provider.name, provider.model), CHARS_PER_TOKEN
        )

    def estimate(self, messages: Sequence[dict[str, Any]], extra_chars: int, p: Provider) -> int:
        """The prompt's size in tokens, as `p` would count it."""
        return self.tokens(prompt_chars(messages) + extra_chars, len(messages), p)

    def tokens(self, chars: int, count: int, p: Provider) -> int:
        """`count` messages of `chars` characters in all, in tokens as `p` would count them."""
        return int(chars / self.chars_per_token(p)) + MESSAGE_OVERHEAD * count

    def threshold(self, provider: Provider) -> int:
        return int(provider.context_tokens * self.compact_at)

    def calibrate(self, key: str, chars: int, prompt_tokens: int) -> None:
        """Learn from what provider `key` ("name/model") said a prompt of `chars`
        characters cost (a moving average, within sane bounds)."""
        if prompt_tokens <= 0 or chars <= 0:
            return
        seen = min(10.0, max(1.0, chars / prompt_tokens))
        self._chars_per_token[key] = 0.7 * self._chars_per_token.get(key, seen) + 0.3 * seen


def prompt_chars(messages: Sequence[dict[str, Any]]) -> int:
    return sum(_message_chars(m) for m in messages)


def provider_key(name: str, model: str) -> str:
    """How calibration names a provider: "name/model"."""
    return f"{name}/{model}"


@attrs.frozen
class Compacted:
    """What a compaction did, for the log and for /compress."""

    trimmed: int = 0  # tool outputs cut
    summarized: int = 0  # messages replaced by a summary
    dropped: int = 0  # messages left out because the summary failed
    summary_chars: int = 0

    def describe(self) -> str:
        if not (self.trimmed or self.summarized or self.dropped):
            return "nothing to compact: the conversation is short"
        parts = []
        if self.summarized:
            parts.append(
                f"summarized {self.summarized} messages into {self.summary_chars} characters"
            )
        if self.dropped:
            parts.append(f"left out {self.dropped} messages (the summary failed)")
        if self.trimmed:
            parts.append(f"cut {self.trimmed} long tool outputs")
        return "; ".join(parts)


SUMMARY_BACKOFF = Backoff(minimum=60.0, maximum=3600.0)


@attrs.define
class SummaryHealth:
    """A session's summary calls failed in a row, and when the next may be made: a
    compaction before then leaves old turns out instead of calling a failing model."""

    failures: int = 0
    not_before: float = 0.0
    rng: random.Random = attrs.Factory(random.Random)

    def failed(self, now: float) -> None:
        self.failures += 1
        self.not_before = now + SUMMARY_BACKOFF.delay(self.failures, self.rng)


class Compactor:
    """Keeps one session's Conversation under a provider's budget."""

    def __init__(
        self,
        budgets: Budgets,
        db: Db,
        session_id: str,
        spill_dir: Path,
        clock: Clock,
        health: SummaryHealth | None = None,
    ) -> None:
        self.health = health or SummaryHealth()  # the session's, kept by the agent
        self.clock = clock  # when a compaction was made
        self.budgets = budgets
        self.db = db
        self.session_id = session_id
        self.spill_dir = spill_dir

    async def fit(
        self, conversation: Conversation, system: str, extra_chars: int, provider: Provider
    ) -> int:
        """Compact `conversation` (in place) if its prompt would pass `provider`'s
        threshold. Returns the prompt's characters then (`extra_chars` not counted):
        measured once, as the turn's one walk over the conversation when it fits."""
        prompt = conversation.prompt(system)
        chars = prompt_chars(prompt)
        size = self.budgets.tokens(chars + extra_chars, len(prompt), provider)
        if size <= self.budgets.threshold(provider):
            return chars
        await self.compact(conversation, system, extra_chars, provider)
        return prompt_chars(conversation.prompt(system))

    async def compact(
        self,
        conversation: Conversation,
        system: str,
        extra_chars: int,
        provider: Provider,
        force: bool = False,
    ) -> Compacted:
        """Bring what is older than the last `keep_turns` turns down to TARGET_SHARE of
        the threshold (or, `force`: summarize it now). The kept turns are touched only
        when the prompt would not fit the threshold with them: then the older of them go
        too, the current turn never. One summary call at most (none while a failed one
        backs off: what it would cover is left out instead)."""
        threshold = self.budgets.threshold(provider)
        target = int(threshold * TARGET_SHARE)
        keep = self._kept_from(conversation)

        def over(limit: int) -> bool:
            return self._size(conversation, system, extra_chars, provider) > limit

        trimmed = await self._trim_tools(conversation, end=keep)
        summarized = dropped = 0
        asked = False  # the one summary attempt of this compaction was made
        if (force or over(target)) and keep > 0:
            summarized, dropped = await self._summarize(conversation, keep, provider)
            asked = True
        if over(threshold):
            trimmed += await self._trim_tools(
                conversation,
                end=len(conversation.messages),
                head=TOOL_HEAD_HARD,
                tail=TOOL_TAIL_HARD,
            )
        current = conversation.turn_starts()[-1:] or [0]
        if over(threshold) and current[0] > 0:  # the recent turns alone do not fit
            if asked:
                dropped += await self._leave_out(conversation, current[0], provider, "")
            else:
                more, lost = await self._summarize(conversation, current[0], provider)
                summarized, dropped = summarized + more, dropped + lost
        summary_chars = len(conversation.summary or "") if summarized else 0
        if over(threshold):
            _cut_long_messages(conversation, share=target * self.budgets.chars_per_token(provider))
        done = Compacted(trimmed, summarized, dropped, summary_chars)
        log.info(
            "session %s: compacted for %s/%s: %s",
            self.session_id,
            provider.name,
            provider.model,
            done.describe(),
        )
        return done

    def _size(self, conversation: Conversation, system: str, extra: int, p: Provider) -> int:
        return self.budgets.estimate(conversation.prompt(system), extra, p)

    def _kept_from(self, conversation: Conversation) -> int:
        """Index of the first message of the turns compaction never touches."""
        starts = conversation.turn_starts()
        if len(starts) <= self.budgets.keep_turns:
            return 0
        return starts[-self.budgets.keep_turns]

    async def _trim_tools(
        self, conversation: Conversation, end: int, head: int = TOOL_HEAD, tail: int = TOOL_TAIL
    ) -> int:
        """Cut tool outputs before index `end` to head and tail, pointing at a file
        that keeps each whole. Returns how many were cut."""
        cut = 0
        for i in range(end):
            message = conversation.messages[i]
            content = message.get("content") or ""
            if message["role"] != "tool" or len(content) <= head + tail + 200:
                continue
            path = await self._spill(message, content, conversation.ids[i])
            where = f"the whole output is in {path}" if path else "the transcript keeps it whole"
            note = (
                f"[… {len(content) - head - tail} characters cut to fit the context window;"
                f" {where} …]"
            )
            kept = f"{content[:head]}\n{note}\n{content[-tail:]}"
            conversation.messages[i] = {**message, "content": kept}
            cut += 1
        return cut

    async def _spill(
        self, message: dict[str, Any], content: str, row_id: int | None
    ) -> Path | None:
        """The file that keeps a cut output whole (None if it cannot be written: the
        output is cut anyway; the transcript in state.db still has it)."""
        which = f"{self.session_id}\0{row_id or message.get('tool_call_id', 'tool')}"
        path = self.spill_dir / f"cut-{hashlib.sha256(which.encode()).hexdigest()[:24]}.txt"
        try:
            await trio.Path(self.spill_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
            if not await trio.Path(path).exists():  # a cut output keeps its first file
                await trio.Path(path).write_text(content, encoding="utf-8")
        except OSError as exc:
            log.warning("session %s: cannot keep a cut tool output: %s", self.session_id, exc)
            return None
        return path

    async def _summarize(
        self, conversation: Conversation, keep: int, provider: Provider
    ) -> tuple[int, int]:
        """Replace messages [0, keep) by a summary; on failure, or while an earlier
        failure backs off, leave them out with a marker. Returns (summarized, dropped)."""
        old = conversation.messages[:keep]
        if not any(i is not None for i in conversation.ids[:keep]):
            return 0, 0
        now = self.clock.now()
        if now < self.health.not_before:
            why = "an earlier summary call failed; the next is tried later"
            return 0, await self._leave_out(conversation, keep, provider, why)
        request = [
            {"role": "system", "content": COMPACTION_PROMPT},
            {
                "role": "user",
                "content": render(conversation.summary, old, self._summary_chars(provider)),
            },
        ]
        try:
            with trio.fail_after(SUMMARY_TIMEOUT):
                reply = await provider.complete(request, [], None)
            summary = (reply.content or "").strip()
            if not summary:
                raise ValueError("the model wrote an empty summary")
        except Exception as exc:  # never fail the user's turn because history is long
            self.health.failed(now)
            return 0, await self._leave_out(conversation, keep, provider, str(exc))
        self.health.failures = 0
        await self._replace(
            conversation, keep, provider, "summary", summary[: self._summary_chars(provider) // 2]
        )
        return len(old), 0

    async def _leave_out(
        self, conversation: Conversation, keep: int, provider: Provider, why: str
    ) -> int:
        """Leave messages [0, keep) out of the prompt with a marker (the transcript keeps
        them); `why` is logged. Returns how many."""
        if not any(i is not None for i in conversation.ids[:keep]):
            return 0
        if why:
            log.warning(
                "session %s: %s; leaving %d old messages out of the prompt instead",
                self.session_id,
                why,
                keep,
            )
        marker = (
            f"[{keep} earlier messages were left out to fit the context window; "
            "the transcript keeps them]"
        )
        summary = f"{conversation.summary}\n\n{marker}" if conversation.summary else marker
        summary = summary[-(self._summary_chars(provider) // 2) :]  # failures do not grow it
        await self._replace(conversation, keep, provider, "dropped", summary)
        return keep

    async def _replace(
        self, conversation: Conversation, keep: int, provider: Provider, kind: str, summary: str
    ) -> None:
        """Messages [0, keep) become `summary`, recorded in state.db. Their untrusted
        mark carries on: a summary written from such text can carry its instructions, and
        what such text led commands to leave in the session's directory is still there;
        only another conversation (/new) starts without it."""
        ids = [i for i in conversation.ids[:keep] if i is not None]
        marks = (conversation.summary_untrusted, *conversation.marks[:keep])
        untrusted = next((m for m in marks if m), None)
        record = Compaction(
            self.session_id, min(ids), max(ids), kind, summary, provider.model, untrusted
        )
        await self.db.write(add_compaction, record, self.clock.now())
        conversation.summary = summary
        conversation.summary_untrusted = untrusted
        del conversation.messages[:keep]
        del conversation.ids[:keep]
        del conversation.marks[:keep]

    def _summary_chars(self, provider: Provider) -> int:
        """What a summary call is given to read, in characters."""
        return int(provider.context_tokens * SUMMARY_SHARE * self.budgets.chars_per_token(provider))


def _cut_long_messages(conversation: Conversation, share: float) -> None:
    """The last resort: cut long messages to a head and a tail so the prompt fits,
    sparing the user's current message (the question must reach the model)."""
    current = conversation.turn_starts()[-1:] or [-1]
    limit = max(400, int(share) // max(1, len(conversation.messages)))
    for i, message in enumerate(conversation.messages):
        content = message.get("content") or ""
        if i == current[0] or len(content) <= limit:
            continue
        half = limit // 2
        cut = f"{content[:half]}\n[… {len(content) - limit} characters cut …]\n{content[-half:]}"
        conversation.messages[i] = {**message, "content": cut}


def render(summary: str | None, messages: Sequence[dict[str, Any]], budget_chars: int) -> str:
    """The turns to summarize as plain text, within `budget_chars` (each message cut
    to its share when they would not fit)."""
    share = max(200, budget_chars // max(1, len(messages)))
    lines = [f"Earlier summary:\n{summary}\n"] if summary else []
    for message in messages:
        text = message.get("content") or ""
        for call in message.get("tool_calls") or ():
            text += f"\n(calls {call['function']['name']} {call['function']['arguments']})"
        if len(text) > share:
            text = text[: share - 20] + " …[cut]"
        lines.append(f"{message['role']}: {text}")
    return "\n".join(lines)[-budget_chars:]
