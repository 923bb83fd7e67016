"""The Outbox actor: order per chat, rate limits, retries, dead letters, restarts.

Timing (a 429's retry-after, a ten-minute outage) runs on the mock clock against an
adapter that answers from a script, since the outbox's contract is the adapter's
typed answer; order, faults and restarts also run against the test platform's fake
over real HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from hermes.actors.actor import Actor
from hermes.actors.clock import WallClock
from hermes.adapters.base import AdapterSetup, AdapterStatus
from hermes.adapters.contract import (
    Permanent,
    RetryAfter,
    Send,
    SendRequest,
    SendResult,
    Sent,
    Target,
)
from hermes.adapters.platform import Pace
from hermes.config import PlatformConfig, Secrets
from hermes.delivery.outbox import Enqueued, Outbox
from hermes.delivery.outbox_store import (
    DEAD,
    SENT,
    UNKNOWN,
    enqueue,
    mark_retry,
    mark_sending,
)
from hermes.state.db import Db
from tests.adapters.testplatform import FakePlatformAdapter
from tests.fakes.chat_platform import FakeChatPlatform

ORIGIN = 1_800_000_000.0
MOCK = WallClock(ORIGIN)  # wall time on the mock clock: ORIGIN at trio time 0
REAL = WallClock()  # the tests over real HTTP run on real time (trio's clock has an offset)
PLATFORM = "testplatform"
TOKEN = "t0k"


class ScriptedPlatform(Actor):
    """An adapter whose answers come from `answer(request)`; it records what it took."""

    def __init__(self, answer: Callable[[SendRequest], SendResult]) -> None:
        super().__init__("scripted")
        self.answer = answer
        self.taken: list[tuple[float, SendRequest]] = []
        self.changed = trio.Event()

    async def handle(self, msg: Any) -> Any:
        assert isinstance(msg, Send)
        result = self.answer(msg.request)
        if not isinstance(result, RetryAfter | Permanent):
            self.taken.append((trio.current_time(), msg.request))
        self.changed.set()
        self.changed = trio.Event()
        msg.reply.set(result)

    async def until(self, found: Callable[[], bool]) -> None:
        with trio.fail_after(3600):
            while not found():
                await self.changed.wait()

    def texts(self, chat: str) -> list[str]:
        return [r.text for _, r in self.taken if r.target.chat_id == chat]


def sent_ok(request: SendRequest) -> SendResult:
    return Sent(f"m-{request.idempotency_key}")


async def queue(
    db: Db, outbox, chat: str, *chunks: str, key: str | None = None, clock: WallClock = MOCK
) -> None:
    now = clock.now()
    key = key or f"{chat}-{chunks[0]}"
    await db.write(enqueue, Target(PLATFORM, chat), list(chunks), "reply", key, now)
    outbox.cast_nowait(Enqueued())


@asynccontextmanager
async def running(registry, home, adapter_address, clock: WallClock = MOCK, paces=None):
    """An Outbox on the test's state.db whose only platform is `adapter_address`."""
    box = Outbox(registry, home.state_db, lambda p: adapter_address if p == PLATFORM else None,
                 clock=clock, **({"paces": paces} if paces is not None else {}))  # fmt: skip
    async with Db(registry, home.state_db) as db, trio.open_nursery() as nursery:
        address = await nursery.start(box.run)
        yield box, address, db
        box.request_drain(trio.current_time() + 5)


async def settled_rows(registry, home) -> list[tuple]:
    """The rows once the outbox has stopped (its last sends recorded)."""
    async with Db(registry, home.state_db) as db:
        return await rows(db)


async def rows(db: Db) -> list[tuple]:
    return await db.read(
        lambda conn: conn.execute(
            "SELECT chat_id, text, state, attempts, last_error FROM outbox ORDER BY id"
        ).fetchall()
    )


# -- on the mock clock, against a scripted adapter ---------------------------------------


async def test_a_429_holds_its_chat_until_exactly_then_while_others_flow(registry, home, io_clock):
    limited = {"first": True}

    def answer(request: SendRequest) -> SendResult:
        if request.target.chat_id == "a" and limited["first"]:
            limited["first"] = False
            return RetryAfter(7.0, "429: too many requests")
        return sent_ok(request)

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            start = trio.current_time()
            await queue(db, outbox, "a", "a1", "a2")
            await platform.until(lambda: not limited["first"])  # a1 got its 429
            await queue(db, outbox, "b", "b1", "b2")
            await platform.until(lambda: platform.texts("b") == ["b1", "b2"])
            assert trio.current_time() - start < 1  # b was not held by a's limit
            assert platform.texts("a") == []
            await platform.until(lambda: platform.texts("a") == ["a1", "a2"])
            first_a = next(t for t, r in platform.taken if r.text == "a1")
            assert 7.0 <= first_a - start < 7.5  # exactly when the platform said
        platform.request_drain(trio.current_time())


async def test_sends_keep_the_platforms_steady_rates_after_a_burst(registry, home, io_clock):
    """Per chat: three at once, then one a second. Overall: ten at once, then ten a
    second; a chat's slow turn never spends the platform's slots."""
    platform = ScriptedPlatform(sent_ok)
    paces = {PLATFORM: Pace(10.0, 1.0, burst=10, chat_burst=3)}
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter, paces=paces) as (box, outbox, db):
            start = trio.current_time()
            await queue(db, outbox, "a", *[f"a{i}" for i in range(6)])
            await platform.until(lambda: len(platform.texts("a")) == 6)
            at = [round(t - start) for t, r in platform.taken if r.target.chat_id == "a"]
            assert at == [0, 0, 0, 1, 2, 3]
            start = trio.current_time()
            for chat in range(30):
                await queue(db, outbox, f"c{chat}", f"c{chat}")
            await platform.until(lambda: len(platform.taken) == 36)
            at = sorted(t - start for t, r in platform.taken[6:])
            assert at[9] < 0.5 and 0.9 < at[19] < 1.5 and 1.9 < at[29] < 2.5  # 10/s after 10
        platform.request_drain(trio.current_time())


async def test_a_global_429_holds_every_chat_of_the_platform(registry, home, io_clock):
    limited = {"first": True}

    def answer(request: SendRequest) -> SendResult:
        if limited["first"]:
            limited["first"] = False
            return RetryAfter(7.0, "429: global", scope_wide=True)
        return sent_ok(request)

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            start = trio.current_time()
            await queue(db, outbox, "a", "a1")
            await platform.until(lambda: not limited["first"])
            await queue(db, outbox, "b", "b1")
            await platform.until(lambda: len(platform.taken) == 2)
            assert all(t - start >= 7.0 for t, _ in platform.taken)
        platform.request_drain(trio.current_time())


async def test_a_ten_minute_outage_loses_nothing_and_keeps_order(registry, home, io_clock):
    down = {"until": 600.0}

    def answer(request: SendRequest) -> SendResult:
        if trio.current_time() < down["until"]:
            return RetryAfter(None, "connection refused")
        return sent_ok(request)

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            for chat in ("a", "b", "c"):
                await queue(db, outbox, chat, *[f"{chat}{i}" for i in range(5)])
            await platform.until(lambda: len(platform.taken) == 15)
            for chat in ("a", "b", "c"):
                assert platform.texts(chat) == [f"{chat}{i}" for i in range(5)]
        platform.request_drain(trio.current_time())
    done = await settled_rows(registry, home)
    assert {state for _, _, state, _, _ in done} == {SENT}
    # backed off while down: a handful of tries per chat, not one a second
    assert max(attempts for _, _, _, attempts, _ in done) <= 12


async def test_a_permanent_error_is_dead_at_once_and_never_retried(registry, home, io_clock):
    calls = []

    def answer(request: SendRequest) -> SendResult:
        calls.append(request.text)
        if request.text == "bad":
            return Permanent("400: chat not found")
        return sent_ok(request)

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            await queue(db, outbox, "a", "bad", "good")
            await platform.until(lambda: platform.texts("a") == ["good"])
            await trio.sleep(3600)  # an hour later: still tried once
            assert calls == ["bad", "good"]
            [(_, _, state, _, error), _] = await rows(db)
            assert state == DEAD and "chat not found" in error
        platform.request_drain(trio.current_time())


async def test_rejected_formatting_is_sent_once_more_as_plain_text(registry, home, io_clock):
    def answer(request: SendRequest) -> SendResult:
        if not request.plain:
            return Permanent("400: can't parse entities", formatting=True)
        if request.text == "still bad":
            return Permanent("400: message is too long")
        return sent_ok(request)

    platform = ScriptedPlatform(answer)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            await queue(db, outbox, "a", "*bold", "still bad")
            await queue(db, outbox, "b", "next")
            await platform.until(lambda: platform.texts("a") == ["*bold"])
            await platform.until(lambda: platform.texts("b") == ["next"])
            assert all(r.plain for _, r in platform.taken)
        platform.request_drain(trio.current_time())
    done = [(text, state) for _, text, state, _, _ in await settled_rows(registry, home)]
    assert done == [("*bold", SENT), ("still bad", DEAD), ("next", SENT)]


async def test_a_row_older_than_the_freshness_limit_is_not_sent(registry, home, io_clock):
    platform = ScriptedPlatform(sent_ok)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with Db(registry, home.state_db) as db:
            old = ORIGIN - 2 * 86400
            await db.write(enqueue, Target(PLATFORM, "a"), ["stale"], "reply", "k-old", old)
        async with running(registry, home, adapter) as (box, outbox, db):
            await queue(db, outbox, "a", "fresh")
            await platform.until(lambda: platform.texts("a") == ["fresh"])
        platform.request_drain(trio.current_time())
    assert [(text, state) for _, text, state, _, _ in await settled_rows(registry, home)] == [
        ("stale", DEAD), ("fresh", SENT)
    ]  # fmt: skip


# -- over real HTTP, against the test platform's fake ------------------------------------


@asynccontextmanager
async def http_platform(
    platform: FakeChatPlatform, admitted: list | None = None, send_timeout: float | None = None
):
    secrets = Secrets({"TP_TOKEN": TOKEN}, frozenset())
    config = PlatformConfig(token_env="TP_TOKEN", base_url=platform.url)

    async def admit(event) -> bool:
        if admitted is not None:
            admitted.append(event)
        return True

    adapter = FakePlatformAdapter(AdapterSetup(PLATFORM, config, secrets, AdapterStatus(), admit))
    if send_timeout is not None:
        adapter.send_timeout = send_timeout
    async with trio.open_nursery() as nursery:
        yield await nursery.start(adapter.run)
        adapter.request_drain(trio.current_time())


async def test_per_chat_order_across_fifty_chats(registry, home):
    with FakeChatPlatform(token=TOKEN) as platform:
        async with http_platform(platform) as adapter, running(registry, home, adapter, REAL) as (
            box, outbox, db,
        ):  # fmt: skip
            for chat in range(50):
                await queue(db, outbox, f"c{chat}", *[f"c{chat}-{i}" for i in range(3)], clock=REAL)
            sent = await trio.to_thread.run_sync(platform.wait_sent, 150, 30.0)
    for chat in range(50):
        texts = [s["text"] for s in sent if s["chat_id"] == f"c{chat}"]
        assert texts == [f"c{chat}-{i}" for i in range(3)]
    assert len({s["idempotency_key"] for s in sent}) == 150


async def test_after_a_restart_pending_goes_once_and_an_unanswered_send_is_unknown(registry, home):
    """The state a SIGKILL leaves: one row sent, one mid-send, one waiting to retry, one
    never started. The fake does not deduplicate, so the mid-send one is not resent."""
    with FakeChatPlatform(token=TOKEN) as platform:
        async with Db(registry, home.state_db) as db:
            now = REAL.now()
            for key, text in (("k1", "was sending"), ("k2", "to retry"), ("k3", "pending")):
                await db.write(enqueue, Target(PLATFORM, key), [text], "reply", key, now)
            await db.write(mark_sending, 1, now)
            await db.write(mark_sending, 2, now)
            await db.write(mark_retry, 2, now - 1, "503", now)
        async with http_platform(platform) as adapter, running(registry, home, adapter, REAL) as (
            box, outbox, db,
        ):  # fmt: skip
            sent = await trio.to_thread.run_sync(platform.wait_sent, 2, 30.0)
            assert sorted(s["text"] for s in sent) == ["pending", "to retry"]
        states = [state for _, _, state, _, _ in await settled_rows(registry, home)]
        assert states == [UNKNOWN, SENT, SENT]
        async with http_platform(platform) as adapter, running(registry, home, adapter, REAL):
            pass  # a second restart sends nothing more
        assert len(platform.sent) == 2


async def test_a_failing_send_retries_and_a_rejected_one_is_dead(registry, home):
    with FakeChatPlatform(token=TOKEN) as platform:
        platform.fail_sends(503, times=2)
        async with http_platform(platform) as adapter, running(registry, home, adapter, REAL) as (
            box, outbox, db,
        ):  # fmt: skip
            await queue(db, outbox, "a", "after two failures", clock=REAL)
            [sent] = await trio.to_thread.run_sync(platform.wait_sent, 1, 30.0)
            assert sent["text"] == "after two failures"
            platform.fail_sends(403)
            await queue(db, outbox, "b", "forbidden", clock=REAL)
            await trio.to_thread.run_sync(platform.wait_refused, 3, 30.0)
            await queue(db, outbox, "b", "next", key="b-next", clock=REAL)  # b's queue moves on
            await trio.to_thread.run_sync(platform.wait_sent, 2, 30.0)
    assert [(c, s) for c, _, s, _, _ in await settled_rows(registry, home)] == [
        ("a", SENT), ("b", DEAD), ("b", SENT)
    ]  # fmt: skip


async def test_a_held_send_never_blocks_the_adapters_receiving(registry, home):
    """A 429 with a long retry-after holds the chat's row in the outbox, not in the
    adapter: the adapter keeps taking messages from the platform meanwhile."""
    admitted: list = []
    with FakeChatPlatform(token=TOKEN) as platform:
        platform.fail_sends(429, retry_after=3600)
        async with http_platform(platform, admitted) as adapter, running(
            registry, home, adapter, REAL
        ) as (box, outbox, db):  # fmt: skip
            await queue(db, outbox, "a", "held for an hour", clock=REAL)
            await trio.to_thread.run_sync(platform.wait_refused, 1, 30.0)
            update = platform.inject("are you there?")
            await trio.to_thread.run_sync(platform.wait_acked, update, 30.0)
            assert [e.text for e in admitted] == ["are you there?"]
            assert platform.sent == []
        [(_, _, state, _, error)] = await settled_rows(registry, home)
        assert state == "retry" and "429" in error


async def test_a_send_whose_answer_never_came_is_unknown_not_sent_twice(registry, home):
    """The platform took the request and answered too late (a read timeout): it may have
    arrived, so on a platform that does not deduplicate it is never sent again."""
    with FakeChatPlatform(token=TOKEN) as platform:
        platform.hold_sends()
        async with http_platform(platform, send_timeout=0.5) as adapter, running(
            registry, home, adapter, REAL
        ) as (box, outbox, db):  # fmt: skip
            await queue(db, outbox, "a", "slow to answer", clock=REAL)
            await queue(db, outbox, "a", "the next one", key="a-next", clock=REAL)
            await trio.to_thread.run_sync(platform.wait_held, 2, 30.0)  # resent blindly?
            platform.release_sends()
            sent = await trio.to_thread.run_sync(platform.wait_sent, 2, 30.0)
        # each once (released together, they land in either order)
        assert sorted(s["text"] for s in sent) == ["slow to answer", "the next one"]
        assert [(state, attempts) for _, _, state, attempts, _ in
                await settled_rows(registry, home)] == [(UNKNOWN, 1), (SENT, 1)]  # fmt: skip
