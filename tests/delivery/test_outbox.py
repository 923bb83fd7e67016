"""The Outbox actor: order per chat, rate limits, retries, dead letters, restarts.

Timing (a 429's retry-after, a ten-minute outage) runs on the mock clock against an
adapter that answers from a script, since the outbox's contract is the adapter's
typed answer; order, faults and restarts also run through the Telegram adapter
against the fake Bot API over real HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from hermes.actors.actor import Actor
from hermes.actors.clock import Clock
from hermes.actors.link import LinkStatus
from hermes.adapters import contract
from hermes.adapters.base import AdapterSetup
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
from hermes.adapters.telegram.adapter import TelegramAdapter
from hermes.adapters.telegram.config import TelegramConfig
from hermes.config import Secrets
from hermes.delivery.outbox import Enqueued, Outbox
from hermes.delivery.outbox_store import (
    DEAD,
    PENDING,
    SENT,
    UNKNOWN,
    SendNotRecorded,
    enqueue,
    mark_retry,
    mark_sending,
    mark_sent,
    mark_undelivered,
)
from hermes.state.db import Db
from tests.adapters.relay import HeldRelay
from tests.adapters.telegram.serving import TOKEN, TOKEN_VAR
from tests.fakes.telegram import parse_markdown_v2

ORIGIN = 1_800_000_000.0
MOCK = Clock(ORIGIN)  # wall time on the mock clock: ORIGIN at trio time 0
REAL = Clock()  # the tests over real HTTP run on real time (trio's clock has an offset)
PLATFORM = "scripted"  # the scripted adapter's platform: no pace unless a test sets one
TELEGRAM = "telegram"


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
    db: Db,
    outbox,
    chat: str,
    *chunks: str,
    key: str | None = None,
    clock: Clock = MOCK,
    platform: str = PLATFORM,
) -> None:
    now = clock.now()
    key = key or f"{chat}-{chunks[0]}"
    await db.write(enqueue, Target(platform, chat), list(chunks), "reply", key, now)
    outbox.cast_nowait(Enqueued())


@asynccontextmanager
async def running(
    registry, home, adapter_address, clock: Clock = MOCK, paces=None, platform=PLATFORM
):
    """An Outbox on the test's state.db whose only platform is `adapter_address`."""
    box = Outbox(registry, home.state_db, lambda p: adapter_address if p == platform else None,
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


class Observing(ScriptedPlatform):
    """A scripted adapter that notes, as each send reaches it, every row's state and how
    many transactions state.db's writer has committed."""

    def __init__(self, registry) -> None:
        super().__init__(sent_ok)
        self.registry = registry
        self.db: Db | None = None
        self.seen: list[tuple[str, list[str], int]] = []

    def commits(self) -> int:
        [generation] = self.registry.generations()
        return generation.actor.core.batches

    async def handle(self, msg: Any) -> Any:
        states = [state for _, _, state, _, _ in await rows(self.db)]
        self.seen.append((msg.request.text, states, self.commits()))
        return await super().handle(msg)


async def test_a_row_is_sent_only_once_answered_and_its_mark_takes_the_next_in_one_commit(
    registry, home, io_clock
):
    """While the platform has a chunk, its row is `sending` and the later ones are not
    started; it is `sent` only after the answer, and that mark takes the chat's next
    chunk for its send in the same commit: a chunk after the first costs one commit."""
    platform = Observing(registry)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):
            platform.db = db
            await queue(db, outbox, "a", "a0", "a1", "a2")
            await platform.until(lambda: len(platform.taken) == 3)
        platform.request_drain(trio.current_time())
    assert [(text, states) for text, states, _ in platform.seen] == [
        ("a0", ["sending", PENDING, PENDING]),
        ("a1", [SENT, "sending", PENDING]),
        ("a2", [SENT, SENT, "sending"]),
    ]
    commits = [n for _, _, n in platform.seen]
    assert [b - a for a, b in zip(commits, commits[1:], strict=False)] == [1, 1]
    assert [state for _, _, state, _, _ in await settled_rows(registry, home)] == [SENT] * 3


async def test_a_chats_next_chunk_is_not_taken_before_its_slot(registry, home, io_clock):
    """Paced at one a second per chat, the next chunk stays `pending` (never started,
    so a restart sends it) until its slot comes."""
    platform = Observing(registry)
    paces = {PLATFORM: Pace(per_chat_per_second=1.0, chat_burst=1)}
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter, paces=paces) as (box, outbox, db):
            platform.db = db
            start = trio.current_time()
            await queue(db, outbox, "a", "a0", "a1")
            await platform.until(lambda: len(platform.taken) == 1)
            await trio.sleep_until(start + 0.5)  # a0 answered; a1's slot is at 1 s
            if trio.current_time() < start + 1.0:  # a busy machine's slow write can let the
                # clock jump to the slot (it waits 20 ms of idleness); `seen` shows it anyway
                assert [state for _, _, state, _, _ in await rows(db)] == [SENT, PENDING]
            await platform.until(lambda: len(platform.taken) == 2)
            assert trio.current_time() - start >= 1.0
        platform.request_drain(trio.current_time())
    assert [states for _, states, _ in platform.seen] == [["sending", PENDING], [SENT, "sending"]]


async def test_a_chats_next_chunk_waits_while_another_serve_sends_its_first(
    registry, home, io_clock
):
    """Two serves on one state.db (the second started with --no-lock) share the outbox's
    rows: while one sends a chat's first chunk, the other never takes its second."""
    platform = ScriptedPlatform(sent_ok)
    async with trio.open_nursery() as nursery:
        adapter = await nursery.start(platform.run)
        async with running(registry, home, adapter) as (box, outbox, db):

            def taken_by_the_other_serve(conn, now: float) -> int:
                first, _ = enqueue(conn, Target(PLATFORM, "a"), ["a0", "a1"], "reply", "a", now)
                mark_sending(conn, first, now)
                return first

            first = await db.write(taken_by_the_other_serve, MOCK.now())
            await queue(db, outbox, "b", "b0", "b1")  # this outbox looks at the rows again
            await platform.until(lambda: platform.texts("b") == ["b0", "b1"])
            assert platform.texts("a") == []
            assert [(chat, state) for chat, _, state, _, _ in await rows(db)][:2] == [
                ("a", "sending"), ("a", PENDING)
            ]  # fmt: skip
            await db.write(mark_sent, first, "m-a0", MOCK.now())  # the other serve's answer
            outbox.cast_nowait(Enqueued())
            await platform.until(lambda: platform.texts("a") == ["a1"])
        platform.request_drain(trio.current_time())


# -- over real HTTP, through the Telegram adapter and the fake Bot API -----------------------


@asynccontextmanager
async def telegram(url: str, admitted: list | None = None):
    """The Telegram adapter as an actor on the Bot API at `url`; what it admits goes to
    `admitted`."""
    config = TelegramConfig(token_env=TOKEN_VAR, base_url=url, poll_timeout=1)
    secrets = Secrets({TOKEN_VAR: TOKEN}, frozenset())

    async def admit(event, cursor=None) -> bool:
        if admitted is not None:
            admitted.append(event)
        return True

    actor = TelegramAdapter(AdapterSetup(TELEGRAM, config, secrets, LinkStatus(), admit))
    async with trio.open_nursery() as nursery:
        yield await nursery.start(actor.run)
        actor.request_drain(trio.current_time())


@asynccontextmanager
async def sending(registry, home, url: str, admitted: list | None = None):
    """An Outbox (real time, no pace) sending through the Telegram adapter at `url`."""
    async with (
        telegram(url, admitted) as address,
        running(registry, home, address, REAL, {TELEGRAM: Pace()}, TELEGRAM) as (_, outbox, db),
    ):
        yield outbox, db


async def send(db: Db, outbox, chat: int, *chunks: str, key: str | None = None) -> None:
    await queue(db, outbox, str(chat), *chunks, key=key, clock=REAL, platform=TELEGRAM)


def shown(sent: list[dict], chat: int | None = None) -> list[str]:
    """The texts of the messages sent (to `chat`), as their user reads them."""
    return [parse_markdown_v2(s["text"]) for s in sent if chat in (None, s["chat_id"])]


async def test_per_chat_order_across_fifty_chats(registry, home, tg):
    async with sending(registry, home, tg.url) as (outbox, db):
        for chat in range(50):
            await send(db, outbox, 100 + chat, *[f"chat {chat} part {i}" for i in range(3)])
        sent = await trio.to_thread.run_sync(tg.wait_sent, 150, 30.0)
    for chat in range(50):
        assert shown(sent, 100 + chat) == [f"chat {chat} part {i}" for i in range(3)]


async def test_after_a_restart_pending_goes_once_and_an_unanswered_send_is_unknown(
    registry, home, tg
):
    """The state a SIGKILL leaves: one row mid-send, one waiting to retry, one never
    started. Telegram does not deduplicate, so the mid-send one is not resent."""
    async with Db(registry, home.state_db) as db:
        now = REAL.now()
        for chat, text in ((1, "was sending"), (2, "to retry"), (3, "pending")):
            await db.write(enqueue, Target(TELEGRAM, str(chat)), [text], "reply", text, now)
        await db.write(mark_sending, 1, now)
        await db.write(mark_sending, 2, now)
        await db.write(mark_retry, 2, now - 1, "503", now)
    async with sending(registry, home, tg.url):
        sent = await trio.to_thread.run_sync(tg.wait_sent, 2, 30.0)
        assert sorted(shown(sent)) == ["pending", "to retry"]
    states = [state for _, _, state, _, _ in await settled_rows(registry, home)]
    assert states == [UNKNOWN, SENT, SENT]
    async with sending(registry, home, tg.url):
        pass  # a second restart sends nothing more
    assert len(tg.sent) == 2


async def test_a_failing_send_retries_and_a_rejected_one_is_dead(registry, home, tg):
    tg.fail("sendMessage", 503, times=2)
    async with sending(registry, home, tg.url) as (outbox, db):
        await send(db, outbox, 1, "after two failures")
        sent = await trio.to_thread.run_sync(tg.wait_sent, 1, 30.0)
        assert shown(sent) == ["after two failures"]
        tg.fail("sendMessage", 403)
        await send(db, outbox, 2, "forbidden")
        await trio.to_thread.run_sync(tg.wait_refused, 3, 30.0)
        await send(db, outbox, 2, "next", key="2-next")  # chat 2's queue moves on
        await trio.to_thread.run_sync(tg.wait_sent, 2, 30.0)
    assert [(c, s) for c, _, s, _, _ in await settled_rows(registry, home)] == [
        ("1", SENT), ("2", DEAD), ("2", SENT)
    ]  # fmt: skip
    assert len(tg.refused) == 3  # the dead one was tried once


async def test_a_held_send_never_blocks_the_adapters_receiving(registry, home, tg):
    """A 429 with a long retry-after holds the chat's row in the outbox, not in the
    adapter: the adapter keeps taking messages from the platform meanwhile."""
    admitted: list = []
    tg.fail("sendMessage", 429, retry_after=3600)
    async with sending(registry, home, tg.url, admitted) as (outbox, db):
        await send(db, outbox, 1, "held for an hour")
        await trio.to_thread.run_sync(tg.wait_refused, 1, 30.0)
        update = tg.message("are you there?")
        await trio.to_thread.run_sync(tg.wait_acked, update, 30.0)
        assert [e.text for e in admitted] == ["are you there?"]
        assert tg.sent == []
    [(_, _, state, _, error)] = await settled_rows(registry, home)
    assert state == "retry" and "429" in error


async def test_a_send_whose_answer_never_came_is_unknown_not_sent_twice(
    registry, home, tg, monkeypatch
):
    """The request left and no answer came within the send's deadline (it was held on its
    way: tests/adapters/relay.py): it may have arrived, so on a platform that does not
    deduplicate it is never sent again; the chat's next message goes after it."""
    monkeypatch.setattr(contract, "SEND_DEADLINE", 1.0)  # the contract's 30 s, shorter
    with HeldRelay(tg.url) as relay:
        relay.hold(b"/sendMessage")
        async with sending(registry, home, relay.url) as (outbox, db):
            await send(db, outbox, 1, "slow to answer")
            await send(db, outbox, 1, "the next one", key="1-next")
            await trio.to_thread.run_sync(relay.wait_held, 2, 30.0)  # resent blindly?
            relay.release()
            sent = await trio.to_thread.run_sync(tg.wait_sent, 2, 30.0)
        # each once (released together, they land in either order)
        assert sorted(shown(sent)) == ["slow to answer", "the next one"]
        assert [(state, attempts) for _, _, state, attempts, _ in
                await settled_rows(registry, home)] == [(UNKNOWN, 1), (SENT, 1)]  # fmt: skip


async def test_a_failure_reported_before_its_send_is_recorded_is_asked_again(registry, home):
    """A platform can report a send failed (a WhatsApp status) before hermes recorded the
    send's answer: nothing matches yet, so the report is refused for the platform to
    deliver again, and once the answer is recorded it turns the row dead."""
    async with Db(registry, home.state_db) as db:

        def sending(conn, now: float) -> int:
            [first] = enqueue(conn, Target(PLATFORM, "a"), ["a0"], "reply", "a", now)
            mark_sending(conn, first, now)
            return first

        row = await db.write(sending, 1.0)
        with pytest.raises(SendNotRecorded):
            await db.write(mark_undelivered, PLATFORM, "m-1", "undeliverable", 2.0)
        assert [state for _, _, state, _, _ in await rows(db)] == ["sending"]
        await db.write(mark_sent, row, "m-1", 3.0)
        assert await db.write(mark_undelivered, PLATFORM, "m-1", "undeliverable", 4.0) == 1
        assert [state for _, _, state, _, _ in await rows(db)] == [DEAD]
        assert await db.write(mark_undelivered, PLATFORM, "m-other", "x", 5.0) == 0  # not ours
