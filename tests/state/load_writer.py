"""A process that writes to a state.db under load, printing each acknowledged row.

Used by the crash and two-process tests:
    python -m tests.state.load_writer DB TAG PRODUCERS WRITES_EACH
Prints "ack <tag>-<producer>-<n>" after each write's commit was acknowledged,
then "done" when every write is acknowledged.
"""

from __future__ import annotations

import sys
import time

import trio

from hermes.state.db import Db
from hermes.state.messages import NewMessage, append_message
from hermes.state.registry import Registry
from hermes.state.sessions import NewSession, ensure_session


async def main(db: str, tag: str, producers: int, writes: int) -> None:
    registry = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        async with Db(registry, db) as gen:
            await gen.write(ensure_session, NewSession("load", started_at=time.time()))

            async def producer(p: int) -> None:
                for n in range(writes):
                    key = f"{tag}-{p}-{n}"
                    await gen.write(
                        append_message, NewMessage("load", "user", key, timestamp=time.time())
                    )
                    sys.stdout.write(f"ack {key}\n")
                    sys.stdout.flush()

            async with trio.open_nursery() as workers:
                for p in range(producers):
                    workers.start_soon(producer, p)
        registry.request_drain(trio.current_time() + 30)
    print("done", flush=True)


if __name__ == "__main__":
    db, tag, producers, writes = sys.argv[1:5]
    trio.run(main, db, tag, int(producers), int(writes))
