"""The collector: keeps Python's cyclic garbage collector out of the turns' way.

Serve holds many long-lived objects: its modules and tree, and every live
session's conversation. Left alone, the collector's older-generation passes walk
all of them, and each such pass (25-130 ms with 1,000 sessions open, most finding
nothing) lands in the latency of whatever turn is running. So what exists once
the tree is up is frozen (`gc.freeze`: taken out of every generation, never
walked by an automatic pass), and what has lived since is frozen again every
FREEZE_EVERY seconds: the automatic passes walk young objects only, and a burst
of new sessions is out of their way seconds later. A frozen object is still freed
the moment nothing refers to it; only a cycle that dies frozen waits, for the one
full pass made every FULL_PASS_EVERY seconds (unfreeze, collect, freeze again):
one pause at a known, rare moment instead of many at random ones. The youngest
generation is collected every YOUNG allocations instead of Python's 700: measured
on bench/serve.py, a fifth of the collector's time, with a lower tail, since fewer
short-lived objects (a turn's steps, frames, requests) live to be promoted.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import trio
from prometheus_client import Histogram

from hermes.actors.actor import Actor

log = logging.getLogger(__name__)

FREEZE_EVERY = 5.0  # seconds between freezes of what lived through them
FULL_PASS_EVERY = 600.0  # seconds between full passes over everything (frozen included)
YOUNG = 10_000  # allocations between passes over the youngest generation
SLOW_PASS = 0.25  # seconds: a full pass slower than this is logged

FULL_PASSES = Histogram(
    "hermes_gc_full_pass_seconds",
    "The collector's full passes over every object, made by serve on its schedule",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


class Collector(Actor):
    """Freezes and collects on a timer; it takes no messages."""

    def __init__(
        self,
        freeze_every: float = FREEZE_EVERY,
        full_pass_every: float = FULL_PASS_EVERY,
        name: str = "collector",
    ) -> None:
        super().__init__(name)
        self.freeze_every = freeze_every
        self.full_pass_every = full_pass_every
        self.full_passes = 0
        self.last_pass: dict[str, float] = {}

    async def on_start(self) -> None:
        gc.freeze()  # the tree is up: what starting made stays
        self.exits.callback(gc.unfreeze)  # stopped: the collector's own rules again
        thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG, *thresholds[1:])
        self.exits.callback(gc.set_threshold, *thresholds)
        self.nursery.start_soon(self._keep)

    def detail(self) -> dict[str, Any]:
        # Not gc.get_freeze_count(): it walks every frozen object.
        return {"full_passes": self.full_passes, "last_full_pass": self.last_pass}

    async def _keep(self) -> None:
        next_pass = trio.current_time() + self.full_pass_every
        while True:
            await trio.sleep(self.freeze_every)
            if trio.current_time() >= next_pass:
                self.full_pass()
                next_pass = trio.current_time() + self.full_pass_every
            else:
                gc.freeze()

    def full_pass(self) -> None:
        """Every object walked once: the cycles that died frozen are freed."""
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        took = time.perf_counter() - started
        FULL_PASSES.observe(took)
        self.full_passes += 1
        self.last_pass = {"seconds": round(took, 4), "freed": found}
        if took > SLOW_PASS:
            log.info("a full garbage collection took %.0f ms (%d freed)", took * 1000, found)
