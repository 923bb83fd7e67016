"""Group commit through the DbWriter against the raw ceiling and the naive pattern.

Run: python bench/state_writes.py
In one run, on fresh files with the same schema (FTS triggers included):
- hermes: 100 concurrent producers append messages through one DbWriter;
- ceiling: one apsw connection inserting the same rows, 100 per transaction;
- naive: the same 100 producers as threads without a writer actor, one
  transaction per write, each write on a connection of its own (open, write,
  commit, close: the pattern of a program that writes one file from many
  places). For reference, two kinder variants are printed beside it: each
  thread keeping one connection open, and one connection with no
  concurrency at all. The issue's calibration (a prototype reached
  vs_naive 16 at vs_ceiling 0.25, so ceiling/naive was about 64) matches
  the connection-per-write pattern; against the kinder variants the ratio
  is lower, and both are printed so the reader can judge.
Last line: RESULT writes_per_s=<n> vs_ceiling=<x> vs_naive=<y> p99_ms=<z>
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from statistics import median

import apsw
import trio

from hermes.state import schema
from hermes.state.connection import open_writer
from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_message, append_messages
from hermes.state.registry import Registry
from hermes.state.sessions import NewSession, create_session

PRODUCERS = 100
WRITES_EACH = 200
NAIVE_WRITES_EACH = 20
TOTAL = PRODUCERS * WRITES_EACH
ROUNDS = 3


def text(p: int, n: int) -> str:
    return f"producer {p} message {n}: the quick brown fox jumps over the lazy dog"


def fresh(path: Path) -> apsw.Connection:
    conn = open_writer(path)
    schema.migrate(conn)
    create_session(conn, NewSession("bench", started_at=time.time()))
    return conn


def measure_ceiling(path: Path) -> float:
    conn = fresh(path)
    rows = [
        NewMessage("bench", "user", text(p, n), timestamp=time.time())
        for p in range(PRODUCERS)
        for n in range(WRITES_EACH)
    ]
    start = time.perf_counter()
    for i in range(0, len(rows), 100):
        conn.execute("BEGIN IMMEDIATE")
        append_messages(conn, rows[i : i + 100])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return TOTAL / elapsed


def measure_naive_serial(path: Path) -> float:
    conn = fresh(path)
    count = PRODUCERS * NAIVE_WRITES_EACH
    start = time.perf_counter()
    for i in range(count):
        conn.execute("BEGIN IMMEDIATE")
        append_message(
            conn, NewMessage("bench", "user", text(i % PRODUCERS, i), timestamp=time.time())
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


def measure_naive_threads(path: Path, connection_per_write: bool) -> float:
    fresh(path).close()

    def write(conn: apsw.Connection, p: int, n: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        append_message(conn, NewMessage("bench", "user", text(p, n), timestamp=time.time()))
        conn.execute("COMMIT")

    def producer(p: int) -> None:
        if connection_per_write:
            for n in range(NAIVE_WRITES_EACH):
                conn = open_writer(path)
                write(conn, p, n)
                conn.close()
        else:
            conn = open_writer(path)
            for n in range(NAIVE_WRITES_EACH):
                write(conn, p, n)
            conn.close()

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(PRODUCERS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return PRODUCERS * NAIVE_WRITES_EACH / elapsed


async def measure_hermes(path: Path) -> tuple[float, list[float]]:
    registry = Registry()
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, path) as gen:
            await gen.write(create_session, NewSession("bench", started_at=time.time()))

            async def producer(p: int) -> None:
                for n in range(WRITES_EACH):
                    began = time.perf_counter()
                    await gen.write(
                        append_message,
                        NewMessage("bench", "user", text(p, n), timestamp=time.time()),
                    )
                    latencies.append(time.perf_counter() - began)

            start = time.perf_counter()
            async with trio.open_nursery() as producers:
                for p in range(PRODUCERS):
                    producers.start_soon(producer, p)
            elapsed = time.perf_counter() - start
        registry.request_drain(trio.current_time() + 30)
    return TOTAL / elapsed, latencies


def check_rows(path: Path, expected: int) -> None:
    conn = apsw.Connection(str(path))
    got = conn.execute("SELECT count(*) FROM messages").get
    conn.close()
    assert got == expected, (path, got, expected)


def main() -> None:
    ceilings, naives, kept, serials, rates, p50s, p99s = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROUNDS):  # interleaved, fresh files each round; medians reported
            root = Path(tmp) / f"round{r}"
            root.mkdir()
            ceilings.append(measure_ceiling(root / "ceiling.db"))
            serials.append(measure_naive_serial(root / "naive-serial.db"))
            naives.append(measure_naive_threads(root / "naive.db", connection_per_write=True))
            check_rows(root / "naive.db", PRODUCERS * NAIVE_WRITES_EACH)
            kept.append(measure_naive_threads(root / "naive-kept.db", connection_per_write=False))
            check_rows(root / "naive-kept.db", PRODUCERS * NAIVE_WRITES_EACH)
            rate, latencies = trio.run(measure_hermes, root / "hermes.db")
            check_rows(root / "hermes.db", TOTAL)
            latencies.sort()
            rates.append(rate)
            p50s.append(latencies[len(latencies) // 2] * 1000)
            p99s.append(latencies[int(len(latencies) * 0.99)] * 1000)
    ceiling, naive, serial = median(ceilings), median(naives), median(serials)
    naive_kept = median(kept)
    rate, p50, p99 = median(rates), median(p50s), median(p99s)
    print(f"ceiling  one connection, 100 rows per transaction   {ceiling:9.0f} writes/s")
    print(f"naive    {PRODUCERS} threads, a connection per write     {naive:9.0f} writes/s")
    print(f"  kinder {PRODUCERS} threads, a connection each kept open"
          f" {naive_kept:9.0f} writes/s  (hermes {rate / naive_kept:.1f}x)")  # fmt: skip
    print(f"  kinder one connection, 1 write per transaction  {serial:9.0f} writes/s"
          f"  (hermes {rate / serial:.1f}x)")  # fmt: skip
    print(f"hermes   {PRODUCERS} producers through one DbWriter        {rate:9.0f} writes/s")
    print(f"hermes   latency p50 {p50:.2f} ms  p99 {p99:.2f} ms  (medians of {ROUNDS} rounds)")
    print(
        f"RESULT writes_per_s={rate:.0f} vs_ceiling={rate / ceiling:.2f} "
        f"vs_naive={rate / naive:.1f} p99_ms={p99:.2f}"
    )


if __name__ == "__main__":
    main()
