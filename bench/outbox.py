"""The Outbox actor against sending straight through the adapter, on a real HTTP platform.

Run: python bench/outbox.py   (from the repository root; takes well under a minute)
- The fake Bot API (tests/fakes/telegram.py) runs in its own process: a real HTTP
  server that answers each send at once with a message id counted over its life
  (so an id says where the send arrived).
- direct (the baseline): Telegram's adapter running as an actor sends 10,000
  messages over 100 chats: 100 chat tasks, each awaiting
  `adapter.call(Send(...))` for its messages in turn (in order per chat, one in
  flight per chat). Latency: the chat task starting a message's send -> its answer.
- hermes: a fresh state.db, a Registry, and an Outbox whose `adapter_of` gives a
  fresh Telegram adapter on the same fake, with no pace (the fake keeps none). The
  same 10,000 messages are
  enqueued, one `db.write(enqueue, ...)` per chat (its 100 messages as chunks)
  and an `Enqueued()` cast after each, from 100 concurrent producers. The clock
  runs from before the first enqueue until every row is `sent` in state.db.
  Latency, comparable with direct's: the row becoming ready (enqueued, and the
  chat's previous row answered: max(created_at, previous updated_at)) -> the fake
  answering (updated_at); both are the outbox's wall clock. The queue-inclusive
  figure (updated_at - created_at, the whole backlog being enqueued at once) is
  printed beside it, for information.
- Both phases start after a warm-up (one message per chat) and are checked: per
  chat, the message ids the fake gave are increasing in the chat's order (the
  fake's arrival order); each message answered once; for hermes, every row
  `sent` after one attempt, and a probe send before and after the phase shows the
  fake took exactly 10,000 sends in between.
- The adapter runs up to 16 sends at once (a Send carries its reply slot), in
  both phases; a send beyond those waits in its mailbox. The `where` lines
  split the latency: ready -> handed to the adapter (hermes: the previous row's
  mark_sent commit, which takes the chat's next row for its send in the same
  transaction; a chat's first row: the dispatch loop's `due` read and
  mark_sending's commit), the mailbox, the HTTP round trip, and after the answer.
- Both phases above flood: 100 chats always have a message ready, so each runs
  saturated and its latency is Little's law, in-flight chats / throughput (the
  summary prints 100 / rate beside the measured mean and p99). That latency is
  the flood's queueing, not what the outbox adds: it is reported (the RESULT
  line's flood_bound_ms, hermes's 100 / rate), never a target. Their figure is
  the throughput ratio, vs_direct.
- steady, after those two (each side with a fresh adapter, hermes with a fresh
  state.db, the same warm-up and checks): what a user waits when the gateway is
  not flooded. 2,000 messages offered at 200/s, well below both sides' rates,
  round robin over the 100 chats (one every 0.5 s per chat); message n arrives at
  start + n/200 s (`trio.sleep_until` on absolute times: a late wake-up does not
  push the rest; the achieved rate and the wake-ups' lateness are printed). Each
  message is its own arrival: direct, handed to its chat's sender task, which
  sends it at once through `adapter.call(Send(...))` unless the chat's previous
  message is still in flight (one in flight per chat; how many arrivals found
  their chat busy is printed); hermes, a task doing one `db.write(enqueue, ...)`
  of a 1-chunk reply and `nudge` (an `Enqueued()` cast), as a reply is queued.
  Latency: the arrival (wall clock, taken when the producer queues it; hermes's
  created_at is that time) -> the fake's answer recorded (direct: the sender
  task's answer time; hermes: the row's updated_at as it becomes `sent`).
  Checked: every message answered once, in its chat's order (the fake's ids).
Targets (issue 28): vs_direct >= 0.5 (the flood), steady_p99_ms <= 15 (the steady phase).
Last line: RESULT vs_direct=<hermes rate / direct rate, flooded> steady_p99_ms=<hermes's
p99 in the steady phase> flood_bound_ms=<Little's law for hermes's flood: 100 / its rate,
information>
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import CpuWatch, kill, percentile, start_fake  # noqa: E402

from hermes.actors.reply import Reply  # noqa: E402
from hermes.adapters.base import AdapterSetup, AdapterStatus  # noqa: E402
from hermes.adapters.contract import Send, SendRequest, SendResult, Sent, Target  # noqa: E402
from hermes.adapters.telegram.adapter import TelegramAdapter  # noqa: E402
from hermes.adapters.telegram.config import TelegramConfig  # noqa: E402
from hermes.config import Secrets  # noqa: E402
from hermes.delivery.outbox import Enqueued, Outbox, nudge  # noqa: E402
from hermes.delivery.outbox_store import SENT, enqueue  # noqa: E402
from hermes.state.db import Db  # noqa: E402
from hermes.state.registry import Registry  # noqa: E402

PLATFORM = "telegram"
TOKEN = "123456:bench-token"
TOKEN_ENV = "BENCH_TELEGRAM_TOKEN"
PROBE_CHAT = "999999"
CHATS = 100
PER_CHAT = 100
TOTAL = CHATS * PER_CHAT
PHASE_LIMIT = 120.0  # seconds; a phase that takes longer is a failure
BUSY_OTHERS = 0.1  # CPUs taken by other processes during a timed phase worth a warning
TARGET_VS_DIRECT = 0.5
TARGET_STEADY_P99_MS = 15.0
STEADY_RATE = 200.0  # messages/s offered in the steady phase, well below both sides' rates
STEADY_TOTAL = 2000  # round robin over the chats: STEADY_TOTAL // CHATS each


# --- the fake, the adapter, CPU --------------------------------------------------------------


class BenchAdapter(TelegramAdapter):
    """Telegram's adapter, unchanged but for a long progress deadline, an
    event when `expect` sends were answered (hermes's phase waits on it), and when
    each send began and ended in its handler (wall clock, by idempotency key)."""

    progress_deadline = 3600.0

    def __init__(self, url: str) -> None:
        async def admit(event: Any) -> bool:
            return True

        secrets = Secrets({TOKEN_ENV: TOKEN}, frozenset())
        config = TelegramConfig(token_env=TOKEN_ENV, base_url=url)
        super().__init__(AdapterSetup(PLATFORM, config, secrets, AdapterStatus(), admit))
        self.answered = 0
        self.expect = math.inf
        self.reached = trio.Event()
        self.spans: dict[str, tuple[float, float]] = {}

    def await_count(self, more: int) -> trio.Event:
        self.expect = self.answered + more
        self.reached = trio.Event()
        return self.reached

    async def send(self, request: SendRequest) -> SendResult:
        began = time.time()
        result = await super().send(request)
        self.spans[request.idempotency_key] = (began, time.time())
        self.answered += 1
        if self.answered >= self.expect:
            self.reached.set()
        return result


class Handover:
    """The adapter's address as the outbox gets it from `adapter_of`: notes when each
    send was handed to the adapter (its `cast`), then passes it on."""

    def __init__(self, address: Any) -> None:
        self.address = address
        self.handed: dict[str, float] = {}

    async def cast(self, msg: Send) -> None:
        self.handed[msg.request.idempotency_key] = time.time()
        await self.address.cast(msg)


async def send_through(address: Any, request: SendRequest) -> SendResult:
    """One send through the adapter, as the outbox makes it: a Send with its reply slot."""
    reply = Reply()
    try:
        await address.cast(Send(request, reply))
        return await reply.wait()
    finally:
        reply.abandon()


def message_number(result: SendResult) -> int:
    """The fake's count of messages when it took this one (its message id)."""
    if not isinstance(result, Sent) or result.message_id is None:
        raise RuntimeError(f"the fake did not take a send: {result!r}")
    return int(result.message_id)


def text(chat: int, i: int) -> str:
    return f"chat {chat} message {i}: the quick brown fox jumps over the lazy dog"


def chat_id(chat: int) -> str:
    return str(1000 + chat)


STEPS = (
    ("to adapter", "ready -> handed to the adapter"),
    ("mailbox", "handed -> the adapter's handler starts it"),
    ("http", "the HTTP round trip in the handler"),
    ("recorded", "answer -> the time the row records"),
)


@attrs.define
class Phase:
    name: str
    seconds: float = 0.0
    latencies: list[float] = attrs.Factory(list)  # ready -> answered
    queued: list[float] = attrs.Factory(list)  # phase start (or enqueue) -> answered
    steps: dict[str, list[float]] = attrs.Factory(lambda: {name: [] for name, _ in STEPS})
    cpu: CpuWatch | None = None
    notes: list[str] = attrs.Factory(list)

    @property
    def rate(self) -> float:
        return TOTAL / self.seconds

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)

    def line(self, what: str) -> str:
        bench, fake = self.cpu.used
        return (
            f"{self.name:<7} {self.rate:7.0f} msgs/s  ({TOTAL} in {self.seconds:.2f} s)  "
            f"latency p50 {self.p(50):6.2f} ms  p99 {self.p(99):6.2f} ms  "
            f"max {self.p(100):6.2f} ms  ({what})\n"
            f"        queue-inclusive p50 {percentile(self.queued, 50):7.1f} ms  "
            f"p99 {percentile(self.queued, 99):7.1f} ms; cpu per message: bench "
            f"{bench * 1e3 / TOTAL:.3f} ms, fake {fake * 1e3 / TOTAL:.3f} ms "
            f"({bench / self.seconds:.2f} + {fake / self.seconds:.2f} CPUs); "
            f"other processes {self.cpu.others:.2f} CPUs"
        )

    def breakdown(self) -> str:
        return breakdown(self.steps)

    def little(self) -> str:
        """Little's law for a saturated phase: CHATS always in flight, so the mean latency
        is CHATS / throughput; beside it, the measured mean and p99."""
        mean = sum(self.latencies) / len(self.latencies) * 1000
        return (
            f"{self.name} {CHATS} / {self.rate:.0f}/s = {CHATS / self.rate * 1000:.1f} ms "
            f"(measured mean {mean:.1f}, p99 {self.p(99):.1f})"
        )


def breakdown(steps: dict[str, list[float]]) -> str:
    parts = []
    for name, values in steps.items():
        if values:
            mean = sum(values) / len(values) * 1000
            parts.append(f"{name} {mean:.2f}/{percentile(values, 99):.2f}")
    return "        where, mean/p99 ms: " + ", ".join(parts)


@attrs.define
class Steady:
    """A paced phase: STEADY_TOTAL arrivals at STEADY_RATE; latency arrival -> answered."""

    name: str
    arrived: list[float] = attrs.Factory(list)  # wall clock, in arrival order
    late: list[float] = attrs.Factory(list)  # each arrival's wake-up after its scheduled time
    latencies: list[float] = attrs.Factory(list)
    behind: int = 0  # arrivals that found their chat's previous message still in flight
    steps: dict[str, list[float]] = attrs.Factory(dict)
    cpu: CpuWatch | None = None
    notes: list[str] = attrs.Factory(list)

    @property
    def achieved(self) -> float:
        return (len(self.arrived) - 1) / (self.arrived[-1] - self.arrived[0])

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)

    def line(self, what: str) -> str:
        bench, fake = self.cpu.used
        return (
            f"steady {STEADY_RATE:.0f}/s  {self.name}  p50 {self.p(50):6.2f} ms  "
            f"p99 {self.p(99):6.2f} ms  max {self.p(100):6.2f} ms  ({what})\n"
            f"        {STEADY_TOTAL} arrivals in {self.arrived[-1] - self.arrived[0]:.2f} s "
            f"(achieved {self.achieved:.1f}/s, wake-ups late p50 "
            f"{percentile(self.late, 50):.2f} ms, p99 {percentile(self.late, 99):.2f} ms); "
            f"{self.behind} found their chat's previous message in flight; cpu per "
            f"message: bench {bench * 1e3 / STEADY_TOTAL:.3f} ms, fake "
            f"{fake * 1e3 / STEADY_TOTAL:.3f} ms; other processes {self.cpu.others:.2f} CPUs"
        )

    def measure(self, chats: dict[int, list[tuple[float, float]]]) -> None:
        """Latencies and `behind` from each chat's (arrival, answered) pairs, in order."""
        for pairs in chats.values():
            previous = -math.inf
            for arrived, answered in pairs:
                self.latencies.append(answered - arrived)
                self.behind += arrived < previous
                previous = answered


async def pace(steady: Steady, deliver: Callable[[int, int, float], None]) -> None:
    """Offer STEADY_TOTAL messages at STEADY_RATE, round robin over the chats: message n
    arrives at start + n / STEADY_RATE, absolute times, so a late wake-up does not push
    the rest. `deliver(chat, i, arrived)` queues it (arrived: the wall clock) at once."""
    start = trio.current_time()
    for n in range(STEADY_TOTAL):
        due = start + n / STEADY_RATE
        await trio.sleep_until(due)
        steady.late.append(trio.current_time() - due)
        arrived = time.time()
        steady.arrived.append(arrived)
        deliver(n % CHATS, n // CHATS, arrived)


def check_numbers(numbers: dict[int, list[int]], each: int) -> None:
    """Every chat's messages answered once each, in the chat's order (the fake's ids)."""
    for c in range(CHATS):
        got = numbers[c]
        assert len(got) == each, (c, len(got))
        assert all(a < b for a, b in zip(got, got[1:], strict=False)), f"chat {c} out of order"
    assert len({n for got in numbers.values() for n in got}) == CHATS * each, "an id came twice"


# --- direct: the adapter called by 100 chat tasks --------------------------------------------


async def direct_phase(url: str, pids: list[int]) -> Phase:
    phase = Phase("direct")
    adapter = BenchAdapter(url)
    numbers: dict[int, list[int]] = defaultdict(list)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(adapter.run)

        async def send(chat: str, body: str, key: str) -> SendResult:
            return await send_through(address, SendRequest(Target(PLATFORM, chat), body, key))

        async with trio.open_nursery() as warm:  # the connection, the fake's threads
            for c in range(CHATS):
                warm.start_soon(send, f"warm-{c}", "warm", f"direct-warm:{c}")

        async def chat_task(c: int, t0: float) -> None:
            for i in range(PER_CHAT):
                key = f"direct:{c}:{i}"
                handed, began = time.time(), time.perf_counter()
                result = await send(chat_id(c), text(c, i), key)
                answered, done = time.perf_counter(), time.time()
                phase.latencies.append(answered - began)
                phase.queued.append(answered - t0)
                numbers[c].append(message_number(result))
                start, end = adapter.spans.pop(key)
                phase.steps["mailbox"].append(start - handed)
                phase.steps["http"].append(end - start)
                phase.steps["recorded"].append(done - end)

        phase.cpu = CpuWatch(pids)
        t0 = time.perf_counter()
        with trio.fail_after(PHASE_LIMIT):
            async with trio.open_nursery() as chats:
                for c in range(CHATS):
                    chats.start_soon(chat_task, c, t0)
        phase.seconds = time.perf_counter() - t0
        phase.cpu.stop()
        adapter.request_drain(trio.current_time() + 5)

    check_numbers(numbers, PER_CHAT)  # sent one at a time per chat: the fake took them in order
    phase.notes.append(f"order checked on the {CHATS} chats' answers (the fake's ids)")
    return phase


# --- hermes: enqueue, the Outbox sends -------------------------------------------------------


ROWS = (
    "SELECT id, chat_id, text, state, attempts, message_id, created_at, updated_at,"
    " idempotency_key FROM outbox WHERE idempotency_key LIKE ? ORDER BY id"
)


def count_sent(conn: Any, prefix: str = "hermes:") -> int:
    return conn.execute(
        "SELECT count(*) FROM outbox WHERE state = ? AND idempotency_key LIKE ?",
        (SENT, f"{prefix}%"),
    ).fetchone()[0]


async def hermes_phase(url: str, state_db: Path, pids: list[int]) -> Phase:
    phase = Phase("hermes")
    registry = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        adapter = BenchAdapter(url)
        adapter_address = await nursery.start(adapter.run)

        async def probe(key: str) -> int:
            request = SendRequest(Target(PLATFORM, PROBE_CHAT), "probe", key)
            return message_number(await send_through(adapter_address, request))

        handover = Handover(adapter_address)
        outbox = Outbox(
            registry, state_db, lambda p: handover if p == PLATFORM else None, paces={}
        )  # real wall clock; no pace: the fake keeps no rate limit, nor does direct
        async with Db(registry, state_db) as db, trio.open_nursery() as inner:
            outbox_address = await inner.start(outbox.run)

            async def produce(c: int, chat: str, chunks: list[str], key: str) -> None:
                now = time.time()
                await db.write(enqueue, Target(PLATFORM, chat), chunks, "send", key, now)
                outbox_address.cast_nowait(Enqueued())

            warmed = adapter.await_count(CHATS)
            async with trio.open_nursery() as warm:
                for c in range(CHATS):
                    warm.start_soon(produce, c, f"warm-{c}", ["warm"], f"warm:{c}")
            await warmed.wait()
            first = await probe("probe-before")

            [generation] = registry.generations()
            commits = generation.actor.core.batches
            done = adapter.await_count(TOTAL)
            phase.cpu = CpuWatch(pids)
            t0 = time.perf_counter()
            with trio.fail_after(PHASE_LIMIT):
                async with trio.open_nursery() as producers:
                    for c in range(CHATS):
                        chunks = [text(c, i) for i in range(PER_CHAT)]
                        producers.start_soon(produce, c, chat_id(c), chunks, f"hermes:{c}")
                enqueued = time.perf_counter() - t0
                await done.wait()  # the fake answered the last one; its row is marked next
                while await db.read(count_sent) < TOTAL:  # noqa: ASYNC110 - no hook in hermes
                    await trio.sleep(0.002)
            phase.seconds = time.perf_counter() - t0
            phase.cpu.stop()
            commits = generation.actor.core.batches - commits
            last = await probe("probe-after")
            rows = await db.read(lambda conn: conn.execute(ROWS, ("hermes:%",)).fetchall())
            outbox.request_drain(trio.current_time() + 5)
        adapter.request_drain(trio.current_time() + 5)
        registry.request_drain(trio.current_time() + 30)

    assert len(rows) == TOTAL, len(rows)
    by_chat: dict[str, list[tuple]] = defaultdict(list)
    keys = {}
    for row in rows:
        by_chat[row[1]].append(row[:-1])
        keys[row[0]] = row[-1]
    numbers = []
    for c in range(CHATS):
        chat_rows = by_chat[chat_id(c)]
        assert [r[2] for r in chat_rows] == [text(c, i) for i in range(PER_CHAT)], c
        assert all(r[3] == SENT and r[4] == 1 for r in chat_rows), f"chat {c}: not sent once"
        got = [int(r[5].removeprefix("m")) for r in chat_rows]
        assert all(a < b for a, b in zip(got, got[1:], strict=False)), f"chat {c} out of order"
        numbers.extend(got)
        ready = chat_rows[0][6]
        for row_id, _, _, _, _, _, created, answered in chat_rows:
            start = max(created, ready)
            phase.latencies.append(answered - start)
            phase.queued.append(answered - created)
            ready = answered
            key = keys[row_id]
            handed, (began, ended) = handover.handed[key], adapter.spans[key]
            phase.steps["to adapter"].append(handed - start)
            phase.steps["mailbox"].append(began - handed)
            phase.steps["http"].append(ended - began)
            phase.steps["recorded"].append(answered - ended)
    # The fake numbers every send it takes: exactly TOTAL between the two probes.
    assert sorted(numbers) == list(range(first + 1, last)), "the fake took other sends"
    phase.notes.append(
        f"enqueued in {enqueued * 1000:.0f} ms ({CHATS} writes of {PER_CHAT} rows); "
        f"{commits} state.db commits ({commits / TOTAL:.2f} per message); order "
        f"checked on the rows' message ids; the fake took exactly {TOTAL} sends "
        "(probes before and after)"
    )
    return phase


# --- steady: paced arrivals, well below both sides' rates --------------------------------


async def steady_direct(url: str, pids: list[int]) -> Steady:
    """Each arrival goes to its chat's sender task, which sends at once unless the chat's
    previous message is still in flight (one in flight per chat, as in direct_phase)."""
    steady = Steady("direct")
    steady.steps = {"to adapter": [], "mailbox": [], "http": [], "recorded": []}
    adapter = BenchAdapter(url)
    pairs: dict[int, list[tuple[float, float]]] = defaultdict(list)
    numbers: dict[int, list[int]] = defaultdict(list)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(adapter.run)

        async def send(chat: str, body: str, key: str) -> SendResult:
            return await send_through(address, SendRequest(Target(PLATFORM, chat), body, key))

        async with trio.open_nursery() as warm:
            for c in range(CHATS):
                warm.start_soon(send, f"warm-{c}", "warm", f"steady-warm:{c}")

        async def sender(c: int, arrivals: trio.MemoryReceiveChannel) -> None:
            async for i, arrived in arrivals:
                key = f"steady:{c}:{i}"
                handed = time.time()
                result = await send(chat_id(c), text(c, i), key)
                answered = time.time()
                pairs[c].append((arrived, answered))
                numbers[c].append(message_number(result))
                start, end = adapter.spans.pop(key)
                steady.steps["to adapter"].append(handed - arrived)
                steady.steps["mailbox"].append(start - handed)
                steady.steps["http"].append(end - start)
                steady.steps["recorded"].append(answered - end)

        channels = [trio.open_memory_channel[tuple[int, float]](math.inf) for _ in range(CHATS)]

        def deliver(c: int, i: int, arrived: float) -> None:
            channels[c][0].send_nowait((i, arrived))

        steady.cpu = CpuWatch(pids)
        with trio.fail_after(PHASE_LIMIT):
            async with trio.open_nursery() as senders:
                for c, (_, arrivals) in enumerate(channels):
                    senders.start_soon(sender, c, arrivals)
                await pace(steady, deliver)
                for arrive, _ in channels:
                    arrive.close()
        steady.cpu.stop()
        adapter.request_drain(trio.current_time() + 5)

    check_numbers(numbers, STEADY_TOTAL // CHATS)
    steady.measure(pairs)
    steady.notes.append("every message answered once, in its chat's order (the fake's ids)")
    return steady


async def steady_hermes(url: str, state_db: Path, pids: list[int]) -> Steady:
    """Each arrival is a task queuing a 1-chunk reply and nudging the outbox."""
    steady = Steady("hermes")
    steady.steps = {"enqueue": [], "to adapter": [], "mailbox": [], "http": [], "recorded": []}
    registry = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        adapter = BenchAdapter(url)
        adapter_address = await nursery.start(adapter.run)

        async def probe(key: str) -> int:
            request = SendRequest(Target(PLATFORM, PROBE_CHAT), "probe", key)
            return message_number(await send_through(adapter_address, request))

        handover = Handover(adapter_address)
        outbox = Outbox(registry, state_db, lambda p: handover if p == PLATFORM else None,
                        paces={})  # fmt: skip
        arrivals: dict[str, float] = {}  # the row's idempotency key -> arrival (wall clock)
        committed: dict[str, float] = {}  # -> its enqueue's commit answered
        async with Db(registry, state_db) as db, trio.open_nursery() as inner:
            outbox_address = await inner.start(outbox.run)

            async def queue(chat: str, body: str, key: str, now: float) -> None:
                await db.write(enqueue, Target(PLATFORM, chat), [body], "reply", key, now)
                committed[f"{key}:0"] = time.time()
                nudge(outbox_address)

            warmed = adapter.await_count(CHATS)
            async with trio.open_nursery() as warm:
                for c in range(CHATS):
                    warm.start_soon(queue, f"warm-{c}", "warm", f"warm:{c}", time.time())
            await warmed.wait()
            first = await probe("probe-before")

            [generation] = registry.generations()
            commits = generation.actor.core.batches
            done = adapter.await_count(STEADY_TOTAL)
            steady.cpu = CpuWatch(pids)
            with trio.fail_after(PHASE_LIMIT):
                async with trio.open_nursery() as producers:

                    def deliver(c: int, i: int, arrived: float) -> None:
                        key = f"steady:{c}:{i}"
                        arrivals[f"{key}:0"] = arrived
                        producers.start_soon(queue, chat_id(c), text(c, i), key, arrived)

                    await pace(steady, deliver)
                await done.wait()
                while await db.read(count_sent, "steady:") < STEADY_TOTAL:  # noqa: ASYNC110
                    await trio.sleep(0.002)
                steady.cpu.stop()
            commits = generation.actor.core.batches - commits
            last = await probe("probe-after")
            rows = await db.read(lambda conn: conn.execute(ROWS, ("steady:%",)).fetchall())
            outbox.request_drain(trio.current_time() + 5)
        adapter.request_drain(trio.current_time() + 5)
        registry.request_drain(trio.current_time() + 30)

    assert len(rows) == STEADY_TOTAL, len(rows)
    each = STEADY_TOTAL // CHATS
    by_chat: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_chat[row[1]].append(row)
    pairs: dict[int, list[tuple[float, float]]] = defaultdict(list)
    numbers: dict[int, list[int]] = defaultdict(list)
    for c in range(CHATS):
        chat_rows = by_chat[chat_id(c)]
        assert [r[2] for r in chat_rows] == [text(c, i) for i in range(each)], c
        assert all(r[3] == SENT and r[4] == 1 for r in chat_rows), f"chat {c}: not sent once"
        numbers[c] = [int(r[5].removeprefix("m")) for r in chat_rows]
        for _, _, _, _, _, _, created, answered, key in chat_rows:
            arrived = arrivals[key]
            assert created == arrived, (key, created, arrived)  # enqueued with its arrival
            pairs[c].append((arrived, answered))
            handed, (began, ended) = handover.handed[key], adapter.spans[key]
            steady.steps["enqueue"].append(committed[key] - arrived)
            steady.steps["to adapter"].append(handed - committed[key])
            steady.steps["mailbox"].append(began - handed)
            steady.steps["http"].append(ended - began)
            steady.steps["recorded"].append(answered - ended)
    check_numbers(numbers, each)
    # The fake numbers every send it takes: exactly STEADY_TOTAL between the two probes.
    assert sorted(n for got in numbers.values() for n in got) == list(range(first + 1, last))
    steady.measure(pairs)
    steady.notes.append(
        f"every row sent once, in its chat's order (the fake's ids); the fake took exactly "
        f"{STEADY_TOTAL} sends (probes); {commits} state.db commits "
        f"({commits / STEADY_TOTAL:.2f} per message)"
    )
    return steady


# --- the run ---------------------------------------------------------------------------------


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp, contextlib.ExitStack() as st:
        fake, url = start_fake("telegram", "--token", TOKEN)
        st.callback(kill, fake)
        pids = [os.getpid(), fake.pid]
        direct = trio.run(direct_phase, url, pids)
        hermes = trio.run(hermes_phase, url, Path(tmp) / "state.db", pids)
        steady_d = trio.run(steady_direct, url, pids)
        steady_h = trio.run(steady_hermes, url, Path(tmp) / "steady.db", pids)

    print(f"fake       chat platform in its own process at {url}, answering at once; {TOTAL} "
          f"messages over {CHATS} chats, {PER_CHAT} each, one in flight per chat")  # fmt: skip
    print(direct.line("the chat task starting a send -> its answer"))
    print(direct.breakdown())
    print(f"        {direct.notes[0]}")
    print(hermes.line("row ready -> answered, from the rows' created_at/updated_at"))
    print(hermes.breakdown())
    print(f"        {hermes.notes[0]}")
    print("        the hermes adapter is a fresh one on the same fake; queue-inclusive: from "
          "the phase's start (direct) or the row's enqueue (hermes)")  # fmt: skip
    print("        where: " + "; ".join(f"{name}: {what}" for name, what in STEPS))
    print(steady_d.line("arrival -> answered"))
    print(breakdown(steady_d.steps))
    print(f"        {steady_d.notes[0]}")
    print(steady_h.line("arrival -> answered: what a user waits when not flooded"))
    print(breakdown(steady_h.steps))
    print(f"        {steady_h.notes[0]}")
    print(f"        steady: {STEADY_TOTAL} messages offered at {STEADY_RATE:.0f}/s, round robin "
          f"over {CHATS} chats, each its own arrival (hermes: a 1-chunk enqueue and a nudge); "
          "where: enqueue: arrival -> the enqueue committed; to adapter: from that (direct: "
          "the arrival) to handed to the adapter")  # fmt: skip
    vs_direct = hermes.rate / direct.rate
    steady_p99 = steady_h.p(99)
    bound = CHATS / hermes.rate * 1000
    print(f"flooded: hermes/direct rate {vs_direct:.2f} (target >= {TARGET_VS_DIRECT}); latency "
          f"is Little's law, {CHATS} chats in flight / throughput, its mean the bound, p99 "
          f"above it (information, not a target): {direct.little()}; "
          f"{hermes.little()}")  # fmt: skip
    print(f"not flooded ({STEADY_RATE:.0f}/s steady), arrival -> answered: hermes p99 "
          f"{steady_p99:.1f} ms (target <= {TARGET_STEADY_P99_MS:.0f}), direct p99 "
          f"{steady_d.p(99):.1f} ms")  # fmt: skip
    for phase in (direct, hermes, steady_d, steady_h):
        if phase.cpu.others > BUSY_OTHERS:
            print(f"WARNING: other processes took {phase.cpu.others:.2f} CPUs during the "
                  f"{phase.name} phase{' (steady)' if isinstance(phase, Steady) else ''}: "
                  "the figures are not this code's alone")  # fmt: skip
    print(f"RESULT vs_direct={vs_direct:.2f} steady_p99_ms={steady_p99:.1f} "
          f"flood_bound_ms={bound:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
