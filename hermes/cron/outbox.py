"""The delivery outbox: a durable record of each send before it starts, and the sends.

A brief's targets are queued (pending) in one transaction; each send is
marked attempted before it starts and sent or failed after. After a
restart, pending deliveries are sent, and attempted ones are marked unknown
rather than sent twice. One target failing never stops the others.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import apsw
import attrs

from hermes.actors.clock import WallClock
from hermes.config import CronConfig
from hermes.cron.delivery import Deliverer, PlannedTarget, Target, plan_delivery
from hermes.cron.store import Claim, record_delivery
from hermes.state.db import Db

log = logging.getLogger(__name__)


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


def start_delivery(conn: apsw.Connection, delivery_id: int, now: float) -> bool:
    """Mark a pending delivery attempted; False if another process took it first."""
    conn.execute(
        "UPDATE cron_deliveries SET status = 'attempted', updated_at = ?"
        " WHERE id = ? AND status = 'pending'",
        (now, delivery_id),
    )
    return conn.changes() == 1


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


async def deliver_brief(
    db: Db,
    claim: Claim,
    text: str,
    deliverer: Deliverer,
    homes: Mapping[str, Target],
    config: CronConfig,
    clock: WallClock,
) -> list[str]:
    """Queue the brief for each of the job's chat targets, send each, record failures
    on the run (fenced). The output file is the local delivery. Returns the errors."""
    job = claim.job
    plan = plan_delivery(
        job.deliver, job.origin, homes, job.attach_to_session, config.mirror_delivery, job.id
    )
    chats = [p for p in plan.targets if not (p.target.platform == "local" and not p.target.chat_id)]
    queued = await db.write(queue_deliveries, job.id, claim.fence, chats, text, clock.now())
    errors = list(plan.problems)
    for delivery in queued:
        error = await _send(db, delivery, deliverer, clock)
        if error:
            errors.append(error)
    if errors:
        await db.write(record_delivery, job.id, claim.fence, "; ".join(errors))
    return errors


async def resume_deliveries(db: Db, deliverer: Deliverer, clock: WallClock) -> None:
    """After a restart: send what never started; what started is marked unknown."""
    for delivery in await db.write(recover_deliveries, clock.now()):
        error = await _send(db, delivery, deliverer, clock)
        if error:
            log.warning(
                "cron %s: a delivery left from before the restart failed: %s",
                delivery.job_id,
                error,
            )


async def _send(db: Db, delivery: Delivery, deliverer: Deliverer, clock: WallClock) -> str | None:
    """One send, recorded as attempted before it starts; returns the error, if any.
    A delivery another process (a second serve, a `cron run`) took is left to it."""
    planned = delivery.planned
    if not await db.write(start_delivery, delivery.id, clock.now()):
        return None
    try:
        sent = await deliverer.send(planned, delivery.text)
        error = None if sent.success else f"{planned.target}: {sent.error}"
    except Exception as exc:  # one target failing never stops the others
        error = f"{planned.target}: {exc}"
    await db.write(mark_delivery, delivery.id, "failed" if error else "sent", clock.now(), error)
    return error
