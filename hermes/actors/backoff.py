"""Jittered exponential backoff, always inside [minimum, maximum]."""

from __future__ import annotations

import random

import attrs


@attrs.frozen
class Backoff:
    """Delay before the n-th restart in a window: doubles from `minimum`, capped at `maximum`.

    The jitter keeps the delay in [ceiling/2, ceiling] (never below `minimum`), so
    siblings restarted together do not retry in lockstep.
    """

    minimum: float = attrs.field(default=0.1, validator=attrs.validators.ge(0))
    maximum: float = attrs.field(default=5.0)

    @maximum.validator
    def _check_maximum(self, _attr: attrs.Attribute, value: float) -> None:
        if value < self.minimum:
            raise ValueError(f"backoff maximum {value} is below its minimum {self.minimum}")

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before restart number `attempt` (1-based)."""
        ceiling = min(self.maximum, self.minimum * 2.0 ** max(0, attempt - 1))
        floor = max(self.minimum, ceiling / 2)
        return rng.uniform(floor, ceiling)
