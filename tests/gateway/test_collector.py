"""The collector: what exists when serve is up, and what lives a few seconds after,
is out of the automatic passes' way; a cycle that died frozen is freed by the next
full pass; stopping gives the collector back its own rules."""

from __future__ import annotations

import gc
import weakref

import trio

from hermes.gateway.collector import YOUNG, Collector


class Knot:
    """A cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


async def test_what_lives_is_frozen_and_a_dead_frozen_cycle_waits_for_the_full_pass(
    autojump_clock,
):
    collector = Collector(freeze_every=5.0, full_pass_every=60.0)
    thresholds = gc.get_threshold()
    async with trio.open_nursery() as nursery:
        await nursery.start(collector.run)
        assert gc.get_freeze_count() > 0  # frozen at start
        assert gc.get_threshold()[0] == YOUNG

        knot = Knot()
        alive = weakref.ref(knot)
        await trio.sleep(6.0)  # it lived through a freeze
        del knot
        gc.collect()
        assert alive() is not None  # frozen: no automatic or ordinary pass walks it

        young = Knot()
        young_alive = weakref.ref(young)
        del young
        gc.collect()
        assert young_alive() is None  # not frozen yet: collected as ever

        await trio.sleep(60.0)  # the full pass
        assert alive() is None
        assert collector.full_passes == 1
        assert collector.last_pass["freed"] >= 1
        collector.request_drain(trio.current_time())
    assert gc.get_freeze_count() == 0  # stopped: nothing left frozen
    assert gc.get_threshold() == thresholds
