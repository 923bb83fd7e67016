"""A one-shot reply slot: the caller parks on it, the actor fills it once.

Cheaper than a memory channel pair per call, and it knows when the caller has
gone (timeout or cancel), so a late reply is dropped instead of held.
"""

from __future__ import annotations

from typing import Any

import outcome
import trio

_PENDING, _WAITING, _DONE, _ABANDONED = range(4)


class Reply:
    """Filled exactly once by the actor; awaited at most once by the caller."""

    __slots__ = ("_task", "_state", "_outcome")

    def __init__(self) -> None:
        self._task = trio.lowlevel.current_task()
        self._state = _PENDING
        self._outcome: outcome.Outcome | None = None

    def deliver(self, result: outcome.Outcome) -> None:
        """Fill the slot with a value or an error, whichever `result` holds."""
        state = self._state
        if state == _WAITING:
            self._state = _DONE
            trio.lowlevel.reschedule(self._task, result)
        elif state == _PENDING:
            self._state = _DONE
            self._outcome = result
        # _DONE or _ABANDONED: the caller has its answer or has gone; drop it.

    def set(self, value: Any) -> None:
        self.deliver(outcome.Value(value))

    def fail(self, exc: BaseException) -> None:
        self.deliver(outcome.Error(exc))

    def abandon(self) -> None:
        """The caller leaves without waiting (its send failed or it was cancelled)."""
        if self._state != _DONE:
            self._state = _ABANDONED
        self._outcome = None

    async def wait(self) -> Any:
        """The reply. A Trio checkpoint even when the reply is already here: a
        cancelled caller gets Cancelled (and the reply is dropped)."""
        if self._state == _DONE:
            await trio.lowlevel.checkpoint_if_cancelled()
            result, self._outcome = self._outcome, None
            await trio.lowlevel.cancel_shielded_checkpoint()
            return result.unwrap()
        self._state = _WAITING

        def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
            self._state = _ABANDONED
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)
