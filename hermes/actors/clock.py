"""Wall-clock time on top of Trio's clock (schedules, leases, outbox retries).

Jobs are due at wall-clock instants. In production `now()` is time.time() and
sleeps are measured against it afresh each time (so months of drift between
the monotonic and the wall clock do not accumulate). In tests a fixed origin
maps Trio's (mock) clock onto a chosen wall-clock moment, so schedules run on
`autojump_clock`.
"""

from __future__ import annotations

import time

import trio


class Clock:
    """The one clock of serve: wall-clock seconds, on the Trio clock in tests."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = origin  # wall time at trio.current_time() == 0, or None for real time

    def now(self) -> float:
        if self.origin is None:
            return time.time()
        return self.origin + trio.current_time()
