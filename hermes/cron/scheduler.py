"""The Scheduler actor: decides when. It claims due jobs and runs each fire.

It sleeps until the earliest next run (or the earliest lease of a fire to run
out), and wakes at once on `JobsChanged` (every change to jobs goes through the
running serve, which casts it) and when one of its fires ends. It does not poll
state.db, with one exception: a second serve on the same home started with
`--no-lock` cannot hear the other's changes, so it is given
`watch_other_writers` (seconds between looks). While asleep it re-reads the
wall clock at least every WALL_CHECK seconds, so a suspended machine or a
stepped clock delays a run by at most that.

On start it moves wall-clock jobs whose next run was computed in another zone
onto its own (lifecycle.rezone). Each claimed fire runs through
hermes.cron.fire.run_fire in the scheduler's nursery. While the gateway drains
nothing new is dispatched; fires in flight get until the drain deadline, then
are cancelled and recorded as interrupted against their own execution token.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.cron.fire import Fire, FireContext, run_fire
from hermes.cron.lifecycle import SHUT_DOWN, Cause, claim_due, rezone
from hermes.cron.store import JobBusy, JobError, claim_now, earliest_due
from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

# The longest sleep before the wall clock is read again. Trio's clock does not count
# time the machine spent suspended, so a long sleep alone could end hours late.
WALL_CHECK = 300.0


@attrs.frozen
class JobsChanged:
    """Cast after a job was added or changed in this process: re-plan now."""


@attrs.frozen
class RunNow:
    ref: str
    context: str | None = None


@attrs.frozen
class CancelFire:
    """Cancel by job id/name, or by execution token (job_id, fence)."""

    ref: str
    fence: int | None = None


def make_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler(Actor):
    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        ctx: FireContext,
        tz: ZoneInfo | None = None,
        name: str = "scheduler",
        watch_other_writers: float | None = None,
    ) -> None:
        """`watch_other_writers`: look at state.db at least this often (seconds), for a
        serve that shares its home with another one (`--no-lock`) whose changes it
        cannot hear; None (alone on its home): look only when due or told."""
        super().__init__(name)
        self.registry = registry
        self.state_db = state_db
        self.ctx = ctx
        self.tz = tz or ZoneInfo("UTC")
        self.owner = make_owner_id()
        self.watch_other_writers = watch_other_writers
        self.db: Db | None = None
        self.running: dict[tuple[str, int], Fire] = {}
        self._wake = trio.Event()
        self._loop_scope = trio.CancelScope()
        self._dispatching = True
        self._idle = trio.Event()
        self._idle.set()

    # -- life cycle -------------------------------------------------------------

    async def on_start(self) -> None:
        self.db = await self.exits.enter_async_context(Db(self.registry, self.state_db))
        self.nursery.start_soon(self._loop)

    def stop_intake(self) -> None:
        """Draining: dispatch nothing new (fires in flight carry on)."""
        self._dispatching = False
        self._wake.set()
        super().stop_intake()

    async def finish_in_flight(self) -> None:
        await self._idle.wait()

    async def flush(self) -> None:
        self._loop_scope.cancel()  # it may be inside a query: it must not outlive the handle
        for fire in list(self.running.values()):
            fire.cancel(Cause.SHUTDOWN, SHUT_DOWN)
        for fire in list(self.running.values()):
            await fire.done.wait()

    # -- messages -----------------------------------------------------------------

    async def handle(self, msg: Any) -> Any:
        config, clock = self.ctx.config, self.ctx.clock
        match msg:
            case JobsChanged():
                self._wake.set()
                return None
            case RunNow(ref=ref, context=context):
                if not self._dispatching:
                    raise JobBusy("the gateway is shutting down; nothing new is fired")
                claim = await self.db.write(
                    claim_now, ref, self.owner, clock.now(), config.lease_seconds, context
                )
                self._spawn(Fire(claim))
                return claim.job.id, claim.fence
            case CancelFire(ref=ref, fence=fence):
                return self._cancel_local(ref, fence)
        raise JobError(f"the scheduler cannot handle {type(msg).__name__}")

    def _cancel_local(self, ref: str, fence: int | None) -> list[str]:
        cancelled = []
        for (job_id, run_fence), fire in self.running.items():
            if ref in (job_id, fire.claim.job.name) and fence in (None, run_fence):
                fire.cancel(Cause.CANCELLED)
                cancelled.append(f"{job_id}#{run_fence}")
        return cancelled

    # -- the loop -------------------------------------------------------------------

    async def _loop(self) -> None:
        """Everything the scheduler does with state.db on its own runs in this scope,
        which flush cancels before it lets go of the database."""
        with self._loop_scope:
            try:
                moved = await self.db.write(rezone, self.tz, self.ctx.clock.now())
            except StateError as exc:
                log.error("scheduler: cannot move jobs to %s: %s", self.tz.key, exc)
            else:
                if moved:
                    log.warning(
                        "cron: the next run of %d job(s) moved to the time zone %s: %s",
                        len(moved),
                        self.tz.key,
                        ", ".join(moved),
                    )
            await self._plan_until_drained()

    async def _plan_until_drained(self) -> None:
        config, clock = self.ctx.config, self.ctx.clock
        while self._dispatching:
            now = clock.now()
            try:
                report = await self.db.write(
                    claim_due, self.owner, now, config.lease_seconds, self.tz, config.catch_up
                )
                for job_id, fence in report.expired:
                    log.warning(
                        "cron %s run %d: lease expired (its worker stopped); "
                        "recorded as interrupted",
                        job_id,
                        fence,
                    )
                for claim in report.claims:
                    self._spawn(Fire(claim))
                nxt = await self.db.read(earliest_due)
            except StateError as exc:
                log.error("scheduler: cannot read jobs: %s", exc)
                nxt = now + (self.watch_other_writers or WALL_CHECK)  # try again then
            if self.watch_other_writers is not None:
                nxt = min(math.inf if nxt is None else nxt, now + self.watch_other_writers)
            await self._sleep_until(nxt)
            self._wake = trio.Event()

    async def _sleep_until(self, when: float | None) -> None:
        """Until the wall clock reaches `when` (None: forever), or a wake-up."""
        clock = self.ctx.clock
        while when is None or clock.now() < when:
            left = WALL_CHECK if when is None else min(WALL_CHECK, when - clock.now())
            with trio.move_on_after(left):
                await self._wake.wait()
                return

    def _spawn(self, fire: Fire) -> None:
        claim = fire.claim
        self.running[(claim.job.id, claim.fence)] = fire
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self.nursery.start_soon(self._fire, fire)

    async def _fire(self, fire: Fire) -> None:
        claim = fire.claim
        try:
            await run_fire(fire, self.ctx, self.db)
        finally:
            self.running.pop((claim.job.id, claim.fence), None)
            if not self.running:
                self._idle.set()
            self._wake.set()  # what it recorded may be due now (an interrupted one-shot)
