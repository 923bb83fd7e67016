"""/metrics: the Prometheus text format, through prometheus-client.

Events are counted where they happen (messages in at admission, out in the
outbox, turns in the session actor, model calls in the provider chain, cron
fires in the fire lifecycle), on the library's default registry, which also
carries the process's RSS and CPU. What is a state rather than an event (the
outbox by state, actors' restarts and mailboxes, the loop's lag, open
sessions) is read at scrape time from the tree's snapshot and state.db.
"""

from __future__ import annotations

from collections.abc import Iterator

import apsw
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hermes.actors.snapshot import Snapshot
from hermes.delivery.outbox_store import (
    DEAD,
    PENDING,
    RETRY,
    SENDING,
    SENT,
    UNKNOWN,
    depth,
    state_counts,
)
from hermes.ops.readiness import find, walk
from hermes.state.db import Db

STATES = (PENDING, SENDING, RETRY, SENT, DEAD, UNKNOWN)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Scrape(Collector):
    """One scrape's states, gathered before the text is written."""

    def __init__(self, tree: Snapshot, outbox: dict[str, float], lag: float) -> None:
        self.tree, self.outbox, self.lag = tree, outbox, lag

    def collect(self) -> Iterator[Metric]:
        rows = GaugeMetricFamily("hermes_outbox_rows", "Outbox rows by state", labels=["state"])
        for state in STATES:  # every state, none at 0 included: a series never vanishes
            rows.add_metric([state], self.outbox["states"].get(state, 0))
        yield rows
        yield GaugeMetricFamily(
            "hermes_outbox_oldest_pending_seconds",
            "Age of the oldest row waiting to be sent (0: none)",
            value=self.outbox["oldest_age"],
        )
        restarts = GaugeMetricFamily(
            "hermes_actor_restarts", "Restarts of each actor in the tree", labels=["actor"]
        )
        mailbox = GaugeMetricFamily(
            "hermes_actor_mailbox_depth", "Messages waiting in an actor's mailbox", labels=["actor"]
        )
        for path, node in walk(self.tree):
            if not node.name.startswith("session:"):  # one series per chat would never end
                restarts.add_metric([path], node.restarts)
                mailbox.add_metric([path], node.mailbox_depth)
        yield restarts
        yield mailbox
        yield GaugeMetricFamily(
            "hermes_event_loop_lag_seconds",
            "The worst delay of the event loop waking a sleeping task since the last scrape",
            value=self.lag,
        )
        gateway = find(self.tree, "gateway")
        yield GaugeMetricFamily(
            "hermes_open_sessions",
            "Conversations with a live session actor",
            value=gateway.detail.get("sessions", 0) if gateway else 0,
        )


def _outbox(conn: apsw.Connection, now: float) -> dict[str, float]:
    _count, oldest = depth(conn)
    return {"states": state_counts(conn), "oldest_age": now - oldest if oldest else 0.0}


async def exposition(tree: Snapshot, db: Db, lag: float, now: float) -> bytes:
    """The whole scrape: the counted events, then the states as they are `now`."""
    outbox = await db.read(_outbox, now)
    now = CollectorRegistry(auto_describe=False)
    now.register(_Scrape(tree, outbox, lag))
    return generate_latest(REGISTRY) + generate_latest(now)
