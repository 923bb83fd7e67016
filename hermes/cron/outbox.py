"""The delivery outbox: a durable record of each send before it starts.

A brief's targets are queued (pending) in one transaction; each send is
marked attempted before it starts and sent or failed after. After a
restart, pending deliveries are sent, and attempted ones are marked unknown
rather than sent twice.
"""

from __future__ import annotations

import json

import apsw
import attrs

from hermes.cron.delivery import PlannedTarget, Target


@attrs.frozen
class Delivery:
    id: int
    job_id: str
    fence: int
    planned: PlannedTarget
    text: str


def queue_deliveries(
    conn: apsw.Connection,
    job_id: str,
    fence: int,
    targets: list[PlannedTarget],
    text: str,
    now: float,
) -> list[Delivery]:
    queued = []
    for planned in targets:
        t = planned.target
        conn.execute(
            "INSERT INTO cron_deliveries (job_id, fence, platform, chat_id, thread_id, provenance,"
            " mirror, metadata, text, status, created_at) VALUES (?,?,?,?,?,?,?,?,?,'pending',?)",
            (job_id, fence, t.platform, t.chat_id, t.thread_id, planned.provenance,
             int(planned.mirror), json.dumps(planned.meta), text, now),
        )  # fmt: skip
        queued.append(Delivery(conn.last_insert_rowid(), job_id, fence, planned, text))
    return queued


def mark_delivery(
    conn: apsw.Connection, delivery_id: int, status: str, now: float, error: str | None = None
) -> None:
    conn.execute(
        "UPDATE cron_deliveries SET status = ?, error = ?, updated_at = ? WHERE id = ?",
        (status, error, now, delivery_id),
    )


def recover_deliveries(conn: apsw.Connection, now: float) -> list[Delivery]:
    """At start: unconfirmed sends become unknown; never-started ones are returned to send."""
    conn.execute(
        "UPDATE cron_deliveries SET status = 'unknown', updated_at = ?,"
        " error = 'the gateway stopped during the send; not sent again'"
        " WHERE status = 'attempted'",
        (now,),
    )
    rows = conn.execute(
        "SELECT id, job_id, fence, platform, chat_id, thread_id, provenance, mirror, metadata, text"
        " FROM cron_deliveries WHERE status = 'pending' ORDER BY id"
    )
    return [
        Delivery(
            r[0], r[1], r[2],
            PlannedTarget(Target(r[3], r[4], r[5]), r[6], bool(r[7]),
                          tuple(sorted(json.loads(r[8]).items()))),
            r[9],
        )
        for r in rows
    ]  # fmt: skip
