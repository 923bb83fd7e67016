"""Per-user inbound limits: `gateway.rate_limit` messages a minute, then one notice,
then silence until the window has room again.

A user past the limit costs one journal row per message and nothing more: no
turn, no model call, and after the notice no send. Kept on the Trio clock, so
tests run it on the mock clock; what is kept stays bounded (a user's stamps go
when the window has passed them, and `forget_idle` drops users gone quiet).
"""

from __future__ import annotations

import collections
from collections.abc import Hashable

import trio

WINDOW = 60.0


class InboundLimit:
    def __init__(self, per_minute: int, window: float = WINDOW) -> None:
        self.per_minute = per_minute  # 0: no limit
        self.window = window
        self._stamps: dict[Hashable, collections.deque[float]] = {}
        self._told: set[Hashable] = set()

    def take(self, who: Hashable) -> str | None:
        """None: let the message through. Otherwise it is dropped, and the text is what
        to answer: the notice the first time, "" (nothing) after it."""
        if not self.per_minute:
            return None
        now = trio.current_time()
        stamps = self._stamps.setdefault(who, collections.deque())
        while stamps and stamps[0] <= now - self.window:
            stamps.popleft()
        if len(stamps) < self.per_minute:
            stamps.append(now)
            self._told.discard(who)
            return None
        if who in self._told:
            return ""
        self._told.add(who)
        wait = max(1, round(stamps[0] + self.window - now))
        return (
            f"You are writing faster than I answer ({self.per_minute} messages a minute);"
            f" I will read your messages again in {wait} s."
        )

    def wait(self, who: Hashable) -> float:
        """Seconds until `who` may send again (0: now), as `take` counts them."""
        stamps = self._stamps.get(who)
        if not self.per_minute or stamps is None or len(stamps) < self.per_minute:
            return 0.0
        return max(0.0, stamps[0] + self.window - trio.current_time())

    def forget_idle(self) -> None:
        """Drop the users whose last message left the window."""
        now = trio.current_time()
        for who in [w for w, s in self._stamps.items() if not s or s[-1] <= now - self.window]:
            del self._stamps[who]
            self._told.discard(who)
