"""The Scheduler actor: claims due jobs, runs each fire in its own cancel scope.

It sleeps until the earliest next run (and at most POLL_MAX, so jobs changed
by another process, such as `hermes cron add`, are seen), and wakes at once
when told jobs changed in this process. Each fire holds a fenced lease and
renews it from a heartbeat task beside it; a heartbeat that finds the lease
gone cancels the fire. While the gateway drains nothing new is dispatched;
fires in flight get until the drain deadline, then are cancelled and
recorded as interrupted against their own execution token.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.config import CronConfig
from hermes.cron.clock import WallClock
from hermes.cron.delivery import Deliverer, NoAdapters, Target, plan_delivery
from hermes.cron.fire import FireContext, FireResult, execute
from hermes.cron.outbox import Delivery, mark_delivery, queue_deliveries, recover_deliveries
from hermes.cron.result import record_result
from hermes.cron.store import (
    Claim,
    JobError,
    claim_due,
    claim_now,
    earliest_due,
    heartbeat,
    record_delivery,
    record_interrupted,
)
from hermes.state.errors import StateError
from hermes.state.holder import DbHolder
from hermes.state.registry import Registry

log = logging.getLogger(__name__)

POLL_MAX = 5.0


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


@attrs.frozen
class Status:
    pass


@attrs.define
class _Running:
    claim: Claim
    scope: trio.CancelScope
    reason: str = "cancelled"
    done: trio.Event = attrs.Factory(trio.Event)


def make_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler(Actor):
    def __init__(
        self,
        registry: Registry,
        state_db: Path,
        ctx: FireContext,
        output_dir: Path,
        config: CronConfig | None = None,
        tz: ZoneInfo | None = None,
        clock: WallClock | None = None,
        deliverer: Deliverer | None = None,
        homes: dict[str, Target] | None = None,
        name: str = "scheduler",
        poll_max: float = POLL_MAX,
    ) -> None:
        super().__init__(name)
        self.registry = registry
        self.state_db = state_db
        self.ctx = ctx
        self.output_dir = output_dir
        self.config = config or CronConfig()
        self.tz = tz or ZoneInfo("UTC")
        self.clock = clock or WallClock()
        self.deliverer = deliverer or NoAdapters()
        self.homes = homes or {}
        self.owner = make_owner_id()
        self.poll_max = poll_max
        self.db: DbHolder | None = None
        self.running: dict[tuple[str, int], _Running] = {}
        self.finished = 0
        self._wake = trio.Event()
        self._loop_scope = trio.CancelScope()
        self._dispatching = True
        self._idle = trio.Event()
        self._idle.set()

    # -- life cycle -------------------------------------------------------------

    async def on_start(self) -> None:
        self.db = await DbHolder(self.registry, self.state_db).__aenter__()
        self.nursery.start_soon(self._loop)

    def stop_intake(self) -> None:
        """Draining: dispatch nothing new (fires in flight carry on)."""
        self._dispatching = False
        self._wake.set()
        super().stop_intake()

    async def finish_in_flight(self) -> None:
        await self._idle.wait()

    async def flush(self) -> None:
        self._loop_scope.cancel()  # it may be inside a query: it must not outlive the holder
        for run in list(self.running.values()):
            run.reason = "interrupted: the gateway shut down"
            run.scope.cancel()
        for run in list(self.running.values()):
            await run.done.wait()
        if self.db is not None:
            await self.db.close()

    # -- messages -----------------------------------------------------------------

    async def handle(self, msg: Any) -> Any:
        match msg:
            case JobsChanged():
                self._wake.set()
                return None
            case RunNow(ref=ref, context=context):
                claim = await self.db.write(
                    claim_now, ref, self.owner, self.clock.now(), self.config.lease_seconds, context
                )
                self._spawn(claim)
                return claim.job.id, claim.fence
            case CancelFire(ref=ref, fence=fence):
                return self._cancel_local(ref, fence)
            case Status():
                return {
                    "owner": self.owner,
                    "dispatching": self._dispatching,
                    "running": [f"{job}#{fence}" for job, fence in self.running],
                    "finished": self.finished,
                }
        raise JobError(f"the scheduler cannot handle {type(msg).__name__}")

    def _cancel_local(self, ref: str, fence: int | None) -> list[str]:
        cancelled = []
        for (job_id, run_fence), run in self.running.items():
            if ref in (job_id, run.claim.job.name) and fence in (None, run_fence):
                run.reason = "cancelled"
                run.scope.cancel()
                cancelled.append(f"{job_id}#{run_fence}")
        return cancelled

    # -- the loop -------------------------------------------------------------------

    async def _loop(self) -> None:
        """Everything the scheduler does with state.db on its own runs in this scope,
        which flush cancels before it lets go of the database."""
        with self._loop_scope:
            await self._resume_deliveries()
            await self._plan_until_drained()

    async def _plan_until_drained(self) -> None:
        while self._dispatching:
            now = self.clock.now()
            try:
                report = await self.db.write(
                    claim_due,
                    self.owner,
                    now,
                    self.config.lease_seconds,
                    self.tz,
                    self.config.catch_up,
                )
                for claim in report.claims:
                    self._spawn(claim)
                nxt = await self.db.read(earliest_due)
            except StateError as exc:
                log.error("scheduler: cannot read jobs: %s", exc)
                nxt = None
            limit = self.poll_max
            wait = limit if nxt is None else min(limit, max(0.0, nxt - self.clock.now()))
            with trio.move_on_after(wait):
                await self._wake.wait()
            self._wake = trio.Event()

    def _spawn(self, claim: Claim) -> None:
        run = _Running(claim, trio.CancelScope())
        self.running[(claim.job.id, claim.fence)] = run
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self.nursery.start_soon(self._fire, run)

    async def _fire(self, run: _Running) -> None:
        claim = run.claim
        job = claim.job
        try:
            with run.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._heartbeat, run)
                    result = await execute(claim, self.ctx, self.clock.now())
                    nursery.cancel_scope.cancel()
            if run.scope.cancelled_caught:
                await self._interrupted(run)
                return
            try:
                await self._finish(claim, result)
            except (StateError, OSError) as exc:
                log.error("cron %s run %d: cannot record the result: %s", job.id, claim.fence, exc)
        except BaseException:
            await self._interrupted(run)
            raise
        finally:
            run.done.set()
            self.running.pop((job.id, claim.fence), None)
            self.finished += 1
            if not self.running:
                self._idle.set()

    async def _interrupted(self, run: _Running) -> None:
        claim = run.claim
        log.warning("cron %s run %d %s", claim.job.id, claim.fence, run.reason)
        with trio.CancelScope(shield=True):
            try:
                await self.db.write(
                    record_interrupted, claim.job.id, claim.fence, run.reason, self.clock.now()
                )
            except StateError as exc:
                log.error("cron %s: cannot record the interruption: %s", claim.job.id, exc)

    async def _heartbeat(self, run: _Running) -> None:
        claim = run.claim
        interval = self.config.heartbeat_seconds
        while True:
            await trio.sleep(interval)
            ours = await self.db.write(
                heartbeat,
                claim.job.id,
                claim.fence,
                self.owner,
                self.clock.now(),
                self.config.lease_seconds,
            )
            if not ours:
                run.reason = "lost its lease"
                run.scope.cancel()
                return

    async def _finish(self, claim: Claim, result: FireResult) -> None:
        job = claim.job
        _, streak = await record_result(self.db, self.output_dir, claim, result, self.clock.now())
        if streak is None:
            log.warning("cron %s run %d: stale result refused; not delivered", job.id, claim.fence)
            return
        if result.silent:
            return
        text = result.response
        if result.status == "error":
            text = f"Cron job '{job.name}' failed: {result.error}"
            threshold = self.config.failure_nudge_threshold
            if job.recurring and threshold and streak >= threshold:
                text += (
                    f"\n\nThis job has failed {streak} times in a row. "
                    f"Review it with `hermes cron edit {job.id}` or pause it."
                )
        await self._deliver(claim, text)

    async def _deliver(self, claim: Claim, text: str) -> None:
        job = claim.job
        plan = plan_delivery(
            job.deliver,
            job.origin,
            self.homes,
            job.attach_to_session,
            self.config.mirror_delivery,
            job.id,
        )
        chats = [
            p
            for p in plan.targets
            if not (p.target.platform == "local" and p.target.chat_id is None)
        ]  # the output file is the local delivery
        queued = await self.db.write(
            queue_deliveries, job.id, claim.fence, chats, text, self.clock.now()
        )
        errors = list(plan.problems)
        for delivery in queued:
            error = await self._send(delivery)
            if error:
                errors.append(error)
        if errors:
            await self.db.write(record_delivery, job.id, claim.fence, "; ".join(errors))

    async def _send(self, delivery: Delivery) -> str | None:
        """One send, recorded as attempted before it starts; returns the error, if any."""
        planned = delivery.planned
        await self.db.write(mark_delivery, delivery.id, "attempted", self.clock.now())
        try:
            sent = await self.deliverer.send(planned, delivery.text)
            error = None if sent.success else f"{planned.target}: {sent.error}"
        except Exception as exc:  # one target failing never stops the others
            error = f"{planned.target}: {exc}"
        status = "failed" if error else "sent"
        await self.db.write(mark_delivery, delivery.id, status, self.clock.now(), error)
        return error

    async def _resume_deliveries(self) -> None:
        """After a restart: send what never started; what started is marked unknown."""
        for delivery in await self.db.write(recover_deliveries, self.clock.now()):
            error = await self._send(delivery)
            if error:
                log.warning("cron %s: a delivery left from before the restart failed: %s",
                            delivery.job_id, error)  # fmt: skip
