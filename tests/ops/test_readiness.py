"""/ready's body from state.db: the outbox's unknown rows (possibly delivered) beside its
dead ones. The whole surface over HTTP is in test_http.py."""

from __future__ import annotations

import time

from hermes.actors.snapshot import RunState, Snapshot
from hermes.adapters.contract import Target
from hermes.delivery.outbox_store import enqueue, mark_dead, mark_sending, mark_unknown
from hermes.ops.readiness import readiness
from hermes.state.db import Db


async def test_ready_counts_unknown_outbox_rows_beside_dead_ones(registry, db_path):
    now = time.time()

    def write(conn):
        (dead,) = enqueue(conn, Target("tg", "c1"), ["a"], "reply", "k1", now)
        mark_dead(conn, dead, "403: blocked", now)
        for n in (2, 3):
            (row,) = enqueue(conn, Target("tg", f"c{n}"), ["a"], "reply", f"k{n}", now)
            mark_sending(conn, row, now)
            mark_unknown(conn, row, "the answer was lost", now)
        enqueue(conn, Target("tg", "c4"), ["a"], "reply", "k4", now - 100)

    async with Db(registry, db_path) as db:
        await db.write(write)
        result = await readiness(Snapshot("serve", "Supervisor", RunState.RUNNING), db, now)
    outbox = result.body["outbox"]
    assert (outbox["depth"], outbox["dead"], outbox["unknown"]) == (1, 1, 2)
    assert outbox["oldest_pending_age"] >= 100
    assert result.ready  # reported for the operator to act on; the gateway still works
