"""The pace at which hermes connects again after connections that failed early, as the
adapter base runs it for every adapter (Discord's IDENTIFYs are what it protects: a
gateway that closes right after Hello gets an IDENTIFY per connection, and Discord
resets the token past its daily cap). On the virtual clock, with hermes's own
backoff, a stand-in adapter whose connections end at once: no network, so autojump
is exact.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from hermes.actors.link import BACKING_OFF, FATAL, LINK_BACKOFF, LinkStatus
from hermes.adapters.base import AdapterSetup, PlatformAdapter
from hermes.adapters.contract import Cursor, InboundEvent
from hermes.adapters.refusals import Codes, Refusal
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets


async def admit(event: InboundEvent, cursor: Cursor | None = None) -> bool:
    return True


class Flapping(PlatformAdapter[PlatformConfig]):
    """Every connection ends as soon as it opens (as after a Hello), except the ones
    numbered in `healthy`, which settle first."""

    platform = "flapping"

    def __init__(self, status: LinkStatus, healthy: frozenset[int] = frozenset()) -> None:
        super().__init__(
            AdapterSetup("flapping", PlatformConfig(), Secrets({}, frozenset()), status, admit)
        )
        self.healthy = healthy
        self.connects: list[float] = []

    async def connect(self) -> str:
        self.connects.append(trio.current_time())
        if len(self.connects) in self.healthy:
            self.progress()
            self.settled()
        await trio.lowlevel.checkpoint()
        return "the gateway closed the socket (4000)"


async def flap_for(adapter: Flapping, seconds: float) -> list[float]:
    """Run `adapter` for `seconds` of virtual time; when each connection began, from 0.
    A second in, it waits to connect again: its status says so."""
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run)
        await trio.sleep(1.0)
        assert adapter.status.state == BACKING_OFF, adapter.status
        assert "connecting again in" in (adapter.status.reason or "")
        await trio.sleep(seconds - 1.0)
        nursery.cancel_scope.cancel()
    return [t - adapter.connects[0] for t in adapter.connects]


@pytest.mark.timeout(30)
async def test_early_failures_get_a_growing_jittered_pace_that_stays_under_discords_cap(
    autojump_clock,
):
    status = LinkStatus()
    starts = await flap_for(Flapping(status), 24 * 3600.0)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert sum(t < 60 for t in starts) <= 4  # the first minute of a flapping gateway
    assert gaps[0] >= LINK_BACKOFF.minimum and all(g >= gaps[0] / 2 for g in gaps)
    assert all(g <= LINK_BACKOFF.maximum for g in gaps)
    assert sum(g >= LINK_BACKOFF.maximum / 2 for g in gaps) > len(gaps) - 8  # capped soon
    assert len(starts) < 1000  # IDENTIFYs a day, Discord's cap
    assert len(set(gaps[8:])) > 1  # jittered: two hermes do not retry in step
    assert status.early_failures == len(starts)


@pytest.mark.timeout(30)
async def test_a_settled_connection_is_followed_at_once_and_ends_the_run(autojump_clock):
    status = LinkStatus()
    adapter = Flapping(status, healthy=frozenset({5}))
    starts = await flap_for(adapter, 600.0)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert gaps[4] == 0  # after the settled 5th, the 6th at once
    assert LINK_BACKOFF.minimum <= gaps[5] <= 2 * LINK_BACKOFF.minimum  # a new run
    assert gaps[3] > 2 * LINK_BACKOFF.minimum  # the run before it had grown


class Closing(Flapping):
    """A connection that stays until the platform closes it (`closed`)."""

    def __init__(self, status: LinkStatus) -> None:
        super().__init__(status)
        self.closed = trio.Event()

    async def connect(self) -> str:
        self.connects.append(trio.current_time())
        self.progress()
        await self.closed.wait()
        return "the gateway closed the socket (4000)"


@pytest.mark.timeout(30)
async def test_a_token_a_send_found_refused_is_not_undone_by_the_connection_ending(
    autojump_clock,
):
    """A send's refused token ends the adapter; the connection closing at the same moment
    is not paced and reopened, and the status keeps the send's reason."""
    status = LinkStatus()
    adapter = Closing(status)
    async with trio.open_nursery() as nursery:
        await nursery.start(adapter.run)
        await trio.testing.wait_all_tasks_blocked()
        adapter.refused(Refusal(401, "", "401 Unauthorized"), Codes())
        adapter.closed.set()
    assert (status.state, status.reason) == (FATAL, "the token was refused: 401 Unauthorized")
    assert len(adapter.connects) == 1
