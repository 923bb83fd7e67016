"""Where a turn's time went: the part that is hermes's own, apart from the model's
and the tools', for the `hermes_turn_overhead_seconds` histogram.

The router starts one when an event arrives and reads it when the turn's final
step is handed to the adapter; the agent marks the spans it waits on others (a
model call from its request to its last byte, a round of tool calls). What is
left is what hermes added: admission, routing, the prompt, the records, the
reply's way out. Monotonic seconds (Trio's clock).
"""

from __future__ import annotations

import attrs
import trio


@attrs.define(slots=True)
class TurnTimes:
    arrived: float
    outside: float = 0.0  # seconds spent waiting on the model and the tools
    _since: float | None = None  # a wait on others began then, and has not ended

    def wait_begins(self) -> None:
        """A wait on others (a model call: its request goes now; or tool calls) begins;
        a wait already begun goes on (a fallback provider after a failed one)."""
        if self._since is None:
            self._since = trio.current_time()

    def wait_ends(self) -> None:
        if self._since is not None:
            self.outside += trio.current_time() - self._since
            self._since = None

    def overhead(self) -> float:
        """What hermes added so far: the time since arrival, less the waits on others."""
        self.wait_ends()
        return max(0.0, trio.current_time() - self.arrived - self.outside)
