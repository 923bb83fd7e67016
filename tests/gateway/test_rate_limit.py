"""The per-user inbound limit on the mock clock: 20 a minute, one notice, then silence."""

from __future__ import annotations

import trio

from hermes.gateway.rate_limit import InboundLimit


async def test_past_the_limit_one_notice_then_silence_until_the_window_has_room(autojump_clock):
    limit = InboundLimit(3)
    assert [limit.take("ann") for _ in range(3)] == [None, None, None]
    notice = limit.take("ann")
    assert notice and "3 messages a minute" in notice and "60 s" in notice
    assert [limit.take("ann") for _ in range(50)] == [""] * 50  # silence
    assert limit.take("bob") is None  # per user
    await trio.sleep(60)
    assert limit.take("ann") is None  # the window passed: answered again, told again later
    limit.take("ann"), limit.take("ann")
    assert limit.take("ann")


async def test_quiet_users_are_forgotten_and_zero_is_no_limit(autojump_clock):
    limit = InboundLimit(2)
    limit.take("ann")
    await trio.sleep(61)
    limit.forget_idle()
    assert limit._stamps == {}
    assert all(InboundLimit(0).take("ann") is None for _ in range(100))
