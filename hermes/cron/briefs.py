"""A fire's brief into the outbox: every target's chunks, the mirror each carries, and
the run's record of where the brief went, in one transaction.

The outbox sends them (in order per chat, with retries and rate limits) and
writes a mirror when its row is sent. A target that names nowhere, or a
platform with no adapter configured, is a recorded problem on the run; one
target failing never stops the others (each is its own chat in the outbox).
"""

from __future__ import annotations

import logging

import apsw

from hermes.cron.jobs import Job
from hermes.cron.lifecycle import record_delivery
from hermes.cron.store import record_target
from hermes.delivery.channels import Platforms, home_channels
from hermes.delivery.mirror import LOCAL, Mirror, plan_seeds
from hermes.delivery.outbox_store import enqueue
from hermes.delivery.session_keys import Keying
from hermes.delivery.split import chunks_for
from hermes.delivery.targets import plan_delivery
from hermes.state.messages import untrusted_in
from hermes.state.sessions import chat_type_of

log = logging.getLogger(__name__)


def queue_brief(
    conn: apsw.Connection,
    job: Job,
    fence: int,
    text: str,
    platforms: Platforms,
    keying: Keying,
    mirror_default: bool,
    now: float,
    session_id: str | None = None,
) -> list[str]:
    """Queue the brief for each of the job's chat targets; returns the run's problems
    (recorded on it). `platforms`: the enabled platforms, whose home channels count.
    `session_id`: the fire's agent turn, whose untrusted mark a mirror of it carries (a
    brief written from a web page is a web page's words in the conversation it seeds)."""
    untrusted = untrusted_in(conn, session_id) if session_id else None
    homes = {name: home.target for name, home in home_channels(conn, platforms).items()}
    origin = job.origin
    plan = plan_delivery(job.deliver, origin, homes, job.attach_to_session, mirror_default)
    problems = list(plan.problems)
    for planned in plan.targets:
        target = planned.target
        if target.platform != LOCAL and target.platform not in platforms:
            problem = f"{target}: no {target.platform} adapter is configured"
            problems.append(problem)
            record_target(conn, job.id, fence, planned, None, "failed", problem, now)
            continue
        same_chat = origin is not None and (origin.platform, origin.chat_id) == (
            target.platform,
            target.chat_id,
        )
        kind = (
            origin.chat_type if same_chat else chat_type_of(conn, target.platform, target.chat_id)
        )
        seeds, note = plan_seeds(planned, origin, kind, keying)
        if note:
            log.warning("cron %s run %d: %s", job.id, fence, note)
        key = f"cron:{job.id}:{fence}:{target}"
        enqueue(
            conn,
            target,
            chunks_for(text, target.platform),
            "cron",
            key,
            now,
            origin=f"cron:{job.id}:{fence}",
            mirror=Mirror(text, seeds, untrusted) if seeds else None,
        )
        record_target(conn, job.id, fence, planned, key, "queued", note, now)
    if problems:
        record_delivery(conn, job.id, fence, "; ".join(problems))
    return problems
