"""A link to something outside hermes (a chat platform, an MCP server, a remote
machine), as its status outlives the actor that holds it: the actor is made again on
every restart and handed the same LinkStatus, so `hermes status`, `/ready`, `/mcp` and
the dashboard show the restarts, a backoff and why, and the run of early failures goes
on across them.

One set of states for every link: connecting; live (it answered); backing off (a fault,
trying again); down (it failed to come up EARLY_FAILURES_DOWN times in a row, and is
still tried, more slowly); fatal (refused for good: not tried again until serve
restarts); stopped. One pacing policy between attempts that ended before they settled:
LINK_BACKOFF.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from hermes.actors.backoff import Backoff

CONNECTING, LIVE, BACKING_OFF, DOWN, FATAL, STOPPED = (
    "connecting",
    "live",
    "backing off",
    "down",
    "fatal",
    "stopped",
)
# Between attempts that failed before they settled: 8 s, then up to twice as long each
# time (jittered), at most 5 min: at most 4 attempts in the first minute of a flapping
# link and 288 a day (under Discord's 1000 IDENTIFYs a day).
LINK_BACKOFF = Backoff(minimum=8.0, maximum=300.0)
EARLY_FAILURES_DOWN = 3  # attempts in a row that never came up: the link shows as down


@attrs.define
class LinkStatus:
    """One link's state, kept across its actor's restarts. `last_progress`: trio time of
    its last sign of life; `early_failures`: attempts in a row that ended before they
    settled (a new run starts at 0 once one settles)."""

    state: str = CONNECTING
    reason: str | None = None
    last_progress: float | None = None
    early_failures: int = 0

    def failed_early(self, reason: str) -> None:
        """An attempt ended before it settled: backing off, or down after a few in a row
        (a fatal link stays fatal)."""
        self.early_failures += 1
        if self.state != FATAL:
            self.state = DOWN if self.early_failures >= EARLY_FAILURES_DOWN else BACKING_OFF
            self.reason = reason

    def live(self) -> None:
        self.state, self.reason = LIVE, None

    def settled(self) -> None:
        """The attempt showed real progress: the run of early failures is over."""
        self.early_failures = 0

    def detail(self, kind: str) -> dict[str, Any]:
        """What a snapshot shows: the state under `kind` ("adapter", "mcp"), the reason,
        and how long ago the link last showed life (seconds; None: never)."""
        age = None
        if self.last_progress is not None:
            age = round(trio.current_time() - self.last_progress, 1)
        return {kind: self.state, "reason": self.reason, "progress_age": age}
