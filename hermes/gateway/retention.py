"""The Retention actor: keeps what piles up in state.db bounded while serve runs.

Each table is pruned by the module that owns it, on its own rule from
`retention:` in config.yaml; a pass runs every rule in one write, once at
start and then every `prune_every` seconds on the Trio clock (wall-clock time
only sets the cutoffs). Nothing still needed goes: unsent outbox rows, dead
and unknown ones (an operator acts on them), a cron run still running, a
journal event not yet done with. A failed pass is logged and tried again at
the next one: housekeeping never takes the serve down. The same pass evicts the media
cache by age and size (a platform that receives nothing evicts nothing itself), and the
copies of files sent longer ago than the journal is kept.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import apsw
import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.clock import Clock
from hermes.adapters.media import MediaLimits, evict
from hermes.cron.store import prune_deliveries, prune_runs
from hermes.delivery.outbox_store import prune_sent
from hermes.gateway.journal import prune
from hermes.gateway.settings import RetentionConfig
from hermes.state.approvals import prune_approvals
from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.state.pairing import prune_failures
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

DAY = 86400.0
HOUR = 3600.0


def prune_all(conn: apsw.Connection, rules: RetentionConfig, now: float) -> dict[str, int]:
    """Every rule in the caller's transaction; rows pruned by table."""
    return {
        "inbound_journal": prune(conn, now - rules.journal_days * DAY),
        "outbox": prune_sent(conn, now - rules.outbox_sent_days * DAY),
        "cron_runs": prune_runs(conn, rules.cron_runs_per_job),
        "cron_deliveries": prune_deliveries(conn, now - rules.cron_deliveries_days * DAY),
        "pairing_failures": prune_failures(conn, now - rules.pairing_failures_hours * HOUR),
        "approvals": prune_approvals(conn, now - rules.journal_days * DAY),
    }


@attrs.frozen
class Files:
    """The directories of files: the media cache (a directory per platform) and the
    copies of files queued to send."""

    cache: Path
    outgoing: Path
    media: MediaLimits

    def evict(self, rules: RetentionConfig, now: float) -> dict[str, int]:
        """Files removed, by where, their ages counted to `now` (blocking: run in a
        thread)."""
        cached = 0
        for directory in self.cache.iterdir() if self.cache.is_dir() else ():
            if directory.is_dir():
                cached += len(evict(directory, self.media, now=now))
        sent = MediaLimits(cache_cap=1 << 62, max_age=rules.journal_days * DAY)
        outgoing = len(evict(self.outgoing, sent, now=now)) if self.outgoing.is_dir() else 0
        return {"media cache": cached, "outgoing files": outgoing}


class Retention(Actor):
    """Prunes on a timer; it takes no messages."""

    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        rules: RetentionConfig,
        clock: Clock,
        name: str = "retention",
        files: Files | None = None,
    ) -> None:
        super().__init__(name)
        self.files = files
        self.clock = clock
        self.registry = registry
        self.state_db = state_db
        self.rules = rules
        self.db: Db | None = None
        self.passes = 0
        self.last: dict[str, int] = {}
        self.passed = trio.Event()  # set as a pass ends, then replaced: what a test waits on

    async def on_start(self) -> None:
        self.db = await self.exits.enter_async_context(Db(self.registry, self.state_db))
        self.nursery.start_soon(self._prune_every)

    def detail(self) -> dict[str, Any]:
        return {"passes": self.passes, "last_pruned": self.last}

    async def _prune_every(self) -> None:
        while True:
            await self.prune_once()
            await trio.sleep(self.rules.prune_every)

    async def prune_once(self) -> dict[str, int]:
        """One pass; rows pruned by table (empty when the pass failed)."""
        try:
            pruned = await self.db.write(prune_all, self.rules, self.clock.now())
        except (StateError, apsw.Error) as exc:
            log.warning(
                "retention: pruning state.db failed (tried again in %g s): %s",
                self.rules.prune_every,
                exc,
            )
            pruned = {}
        if self.files is not None:
            pruned = {
                **pruned,
                **await trio.to_thread.run_sync(self.files.evict, self.rules, self.clock.now()),
            }
        counts = [f"{n} from {table}" for table, n in pruned.items() if n]
        if counts:
            log.info("retention: pruned %s", ", ".join(counts))
        self.last = pruned
        self.passes += 1
        self.passed.set()
        self.passed = trio.Event()
        return pruned
