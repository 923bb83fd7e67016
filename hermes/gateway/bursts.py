"""Bursts: messages one person sends in one chat in quick succession, held to be one turn.

A paste longer than a platform's limit arrives as two or three messages within a
second; people send "wait", "also...", a photo and then its question. Each part waits
`merge_window` seconds for the next; when none comes, the parts go to the router as one
burst (texts joined in order, every event kept: each is journaled, and the one turn
answers them all). A burst holds at most MAX_PARTS and MAX_CHARS; a drain lets every
burst go at once.

The parts are claimed in the journal as they arrive, so a crash inside the window loses
none: the next serve resumes each (a burst that went to its turn is marked in the journal
and resumed as that one turn). Kept on the Trio clock: tests run it on the mock clock.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import attrs
import trio

from hermes.adapters.contract import InboundEvent
from hermes.gateway.intake import said_by

MAX_PARTS = 16  # a burst that grows to this goes at once
MAX_CHARS = 64_000  # so does one whose text grows to this
JOIN = "\n"  # between parts: a client splits a long paste at a line or a space


def resumed_turns(events: list[InboundEvent], joined: dict[str, tuple[str, bool]]) -> list[Burst]:
    """Events a restart cut, as the turns they were (`joined`: hermes.gateway.journal's
    `joined_to`): one turn's parts and steering messages together, its lead last, its
    text the one it last recorded as the user's (a steering message's, else the parts');
    every other event a turn of its own. In the order they came."""
    turns: dict[str, list[InboundEvent]] = {}
    for event in events:
        key = f"{event.platform}:{event.event_id}"
        turns.setdefault(joined.get(key, (key, False))[0], []).append(event)
    out = []
    for lead, parts in turns.items():
        parts.sort(key=lambda e: f"{e.platform}:{e.event_id}" == lead)  # stable: in order
        steered = [e for e in parts if joined.get(f"{e.platform}:{e.event_id}", ("", False))[1]]
        burst = Burst(parts, resume=True)
        if len(parts) > 1:
            burst.said = said_by(steered[-1]) if steered else burst.text
        out.append(burst)
    return out


def burst_key(event: InboundEvent) -> tuple[str, ...]:
    """One person in one chat (and thread)."""
    return (
        event.platform,
        event.scope_id or "",
        event.chat_id,
        event.thread_id or "",
        event.user_id,
    )


@attrs.define
class Burst:
    """Parts of one message, in arrival order. `arrived`: the last part's arrival (its
    turn's overhead is measured from it, less the window it then waited: `held`, a wait
    config asked for, as the model's is not hermes's); `resume`: parts a restart cut."""

    events: list[InboundEvent]
    arrived: float | None = None
    resume: bool = False
    held: bool = False  # it waited in Bursts for more parts
    due: float = math.inf
    said: str | None = None  # a resumed turn's text: what it last recorded as the user's

    @property
    def lead(self) -> InboundEvent:
        """The part the answer replies to: the last, where the person is now."""
        return self.events[-1]

    @property
    def text(self) -> str:
        if self.said is not None:
            return self.said
        return JOIN.join(e.text.strip() for e in self.events if e.text.strip())


class Bursts:
    """The bursts waiting for their next part, each sent to `go` when its window passes."""

    def __init__(self, go: Callable[[Burst], Awaitable[None]]) -> None:
        self.go = go
        self.waiting: dict[tuple[str, ...], Burst] = {}
        self._changed = trio.Event()

    def add(self, event: InboundEvent, window: float, arrived: float | None) -> Burst | None:
        """Hold `event` for `window` seconds more, with the earlier parts of its burst;
        returns a burst that must go now (it reached MAX_PARTS), else None."""
        key = burst_key(event)
        burst = self.waiting.get(key)
        if burst is None:
            burst = self.waiting[key] = Burst([], held=True)
        burst.events.append(event)
        burst.arrived = arrived
        burst.due = trio.current_time() + window
        self._changed.set()
        if len(burst.events) >= MAX_PARTS or len(burst.text) >= MAX_CHARS:
            burst.due = trio.current_time()  # goes now: it waited no longer
            return self.waiting.pop(key)
        return None

    def take(self, event: InboundEvent) -> Burst | None:
        """The burst `event`'s sender has waiting in its chat, taken out (a /stop)."""
        return self.waiting.pop(burst_key(event), None)

    def take_all(self) -> list[Burst]:
        """Every waiting burst, taken out (a drain: they go now)."""
        bursts, self.waiting = list(self.waiting.values()), {}
        return bursts

    async def run(self) -> None:
        """Send each burst to `go` when its window has passed, in the order they fell due."""
        while True:
            self._changed = trio.Event()
            now = trio.current_time()
            due = sorted((b for b in self.waiting.values() if b.due <= now), key=lambda b: b.due)
            for burst in due:
                del self.waiting[burst_key(burst.lead)]
            for burst in due:
                await self.go(burst)
            if due:
                continue
            next_due = min((b.due for b in self.waiting.values()), default=math.inf)
            with trio.move_on_at(next_due):
                await self._changed.wait()
