"""The requests a platform that answers within its client's request (the local endpoint,
the API) holds open for their turns: each gets its turn's steps as they come, and a
drain waits until every one has had its final step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import trio

from hermes.adapters.contract import TurnStep


class Waiting:
    """By event id. A request `held` steps behind holds its turn back (and with it the
    adapter's mailbox): its client bounds how long by cutting one that stops reading."""

    def __init__(self, held: int) -> None:
        self.held = held
        self._by_event: dict[str, trio.MemorySendChannel[TurnStep]] = {}
        self._ended = trio.Event()

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._by_event

    def __len__(self) -> int:
        return len(self._by_event)

    def held_for(self, event_id: str) -> int:
        """How many steps wait for the request of `event_id` to take them."""
        return self._by_event[event_id].statistics().current_buffer_used

    @contextlib.contextmanager
    def open(self, event_id: str) -> Iterator[trio.MemoryReceiveChannel[TurnStep]]:
        """The steps of the turn of `event_id`, for as long as the request waits on them."""
        send, steps = trio.open_memory_channel[TurnStep](self.held)
        self._by_event[event_id] = send
        try:
            yield steps
        finally:
            del self._by_event[event_id]
            steps.close()  # a step on its way now is dropped, not waited on
            self._ended.set()

    async def show(self, step: TurnStep) -> bool:
        """`step` to the request waiting on its turn; False when none does."""
        waiting = self._by_event.get(step.event_id)
        if waiting is None:
            return False
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await waiting.send(step)  # a request that ended (its client left) takes none
        return True

    async def all_ended(self) -> None:
        """Once no request waits (the router's flush sends each its final step)."""
        while self._by_event:
            await self._ended.wait()
            self._ended = trio.Event()
