"""Bursts on the mock clock: a person's parts in one chat within the merge window are one
burst; a lone message waits the window and no longer; each burst goes once."""

from __future__ import annotations

import trio

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.gateway.bursts import MAX_PARTS, Burst, Bursts, resumed_turns

WINDOW = 1.5


def part(n: int, user: str = "u", chat: str = "c", text: str | None = None) -> InboundEvent:
    return InboundEvent("telegram", str(n), ChatType.DM, chat, user, text or f"part {n}")


class Gone:
    """What `go` was given, and when (the mock clock's time)."""

    def __init__(self) -> None:
        self.bursts: list[tuple[float, Burst]] = []
        self.changed = trio.Event()

    async def __call__(self, burst: Burst) -> None:
        self.bursts.append((trio.current_time(), burst))
        self.changed.set()
        self.changed = trio.Event()

    async def count(self, n: int) -> None:
        while len(self.bursts) < n:
            await self.changed.wait()


async def test_a_lone_message_goes_when_its_window_passes_and_no_later(autojump_clock):
    gone = Gone()
    bursts = Bursts(gone)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bursts.run)
        start = trio.current_time()
        assert bursts.add(part(1), WINDOW, start) is None
        await gone.count(1)
        nursery.cancel_scope.cancel()
    (when, burst), = gone.bursts  # fmt: skip
    assert when - start == WINDOW
    assert [e.event_id for e in burst.events] == ["1"] and burst.arrived == start
    assert burst.held  # its window is a wait, not the turn's overhead


async def test_parts_within_the_window_of_each_other_are_one_burst(autojump_clock):
    gone = Gone()
    bursts = Bursts(gone)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bursts.run)
        start = trio.current_time()
        for n in range(3):  # each 1 s after the last: the window moves with each part
            bursts.add(part(n), WINDOW, trio.current_time())
            await trio.sleep(1.0)
        bursts.add(part(9, user="other"), WINDOW, trio.current_time())  # someone else
        await gone.count(2)
        await trio.sleep(WINDOW * 4)  # nothing else goes later
        nursery.cancel_scope.cancel()
    (first_at, first), (_, other) = gone.bursts
    assert first_at - start == 2.0 + WINDOW
    assert first.text == "part 0\npart 1\npart 2" and first.lead.event_id == "2"
    assert first.arrived == start + 2.0  # the last part's: the window runs from it
    assert [e.user_id for e in other.events] == ["other"]
    assert len(gone.bursts) == 2


async def test_a_part_after_the_window_starts_a_new_burst(autojump_clock):
    gone = Gone()
    bursts = Bursts(gone)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bursts.run)
        bursts.add(part(1), WINDOW, trio.current_time())
        await gone.count(1)
        bursts.add(part(2), WINDOW, trio.current_time())
        await gone.count(2)
        nursery.cancel_scope.cancel()
    assert [b.text for _, b in gone.bursts] == ["part 1", "part 2"]


async def test_a_burst_that_fills_goes_at_once_and_a_drain_takes_the_rest(autojump_clock):
    bursts = Bursts(Gone())
    for n in range(MAX_PARTS - 1):
        assert bursts.add(part(n), WINDOW, None) is None
    full = bursts.add(part(MAX_PARTS), WINDOW, None)
    assert full is not None and len(full.events) == MAX_PARTS and not bursts.waiting
    bursts.add(part(100), WINDOW, None)
    bursts.add(part(101, chat="c2"), WINDOW, None)
    taken = bursts.take_all()
    assert sorted(b.lead.event_id for b in taken) == ["100", "101"] and not bursts.waiting


async def test_stop_takes_the_senders_waiting_burst(autojump_clock):
    bursts = Bursts(Gone())
    bursts.add(part(1), WINDOW, None)
    bursts.add(part(2, user="other"), WINDOW, None)
    taken = bursts.take(part(3))
    assert [e.event_id for e in taken.events] == ["1"]
    assert bursts.take(part(4)) is None and len(bursts.waiting) == 1


def test_a_restart_resumes_one_turns_events_as_that_turn():
    """Its parts and what steered it together, its lead last, with the text the turn last
    recorded as the user's; every other event a turn of its own, in order."""
    a, b, lead, steer, other = (part(n) for n in range(5))
    steer = InboundEvent("telegram", "3", ChatType.DM, "c", "u", "/steer in km")
    joined = {"telegram:0": ("telegram:2", False), "telegram:1": ("telegram:2", False)}
    turns = resumed_turns([a, b, lead, other], joined)
    assert [[e.event_id for e in t.events] for t in turns] == [["0", "1", "2"], ["4"]]
    assert turns[0].text == "part 0\npart 1\npart 2" and turns[0].resume
    assert turns[1].text == "part 4" and turns[1].said is None
    joined["telegram:3"] = ("telegram:2", True)
    (turn,) = resumed_turns([a, b, lead, steer], joined)
    assert turn.lead is lead and turn.text == "in km"  # the last user message it recorded
