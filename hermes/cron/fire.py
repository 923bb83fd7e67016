"""One fire of a job, from its claim to its brief: the one lifecycle every fire follows.

    claim (the scheduler's claim_due, or claim_now for `hermes cron run`)
    → run_fire: execute in the fire's cancel scope, beside a task that keeps
      the lease (renews it every heartbeat, and checks twice a second that it
      is still ours, so a `hermes cron cancel` from anywhere reaches the fire
      at once) → record the result, fenced by the claim's token, or the
      interruption → hand the brief to delivery.

The Scheduler and `hermes cron run` both call run_fire: the scheduler
decides when, this module decides what, delivery sends. Cancelling the
fire's scope kills a script's whole process tree and interrupts an agent
turn.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import attrs
import trio
from prometheus_client import Counter, Histogram

from hermes.actors.address import Address
from hermes.actors.clock import Clock
from hermes.cron.briefs import queue_brief
from hermes.cron.jobs import Job
from hermes.cron.lifecycle import LOST, Cause, Claim, finish_fire, heartbeat, interrupt
from hermes.cron.output import is_silent, write_output
from hermes.cron.settings import CronConfig
from hermes.cron.store import holds_lease
from hermes.delivery.channels import Platforms
from hermes.delivery.outbox import nudge
from hermes.delivery.session_keys import Keying
from hermes.state.db import Db
from hermes.state.errors import StateError
from hermes.terminal.backends.base import Launch
from hermes.terminal.command import RunOptions, run_command
from hermes.terminal.env import EnvPolicy, Redactor

log = logging.getLogger(__name__)

FIRES = Counter("hermes_cron_fires", "Cron fires by what they became", ["outcome"])
LATENESS = Histogram(
    "hermes_cron_lateness_seconds",
    "How long after its due time a fire started",
    buckets=(0.1, 0.5, 1, 5, 30, 60, 300, 3600),
)

SCRIPT_TIMEOUT = 600.0
LEASE_WATCH = 0.5  # seconds between checks that the fire still owns its job


class AgentRunner(Protocol):
    """How a fire reaches the agent (hermes.agent.cron_runner implements it; cron
    sits below the agent and never imports it)."""

    async def run(self, job: Job, prompt: str, session_id: str) -> str:
        """Run one agent turn for `job` in session `session_id`; its final text.

        Raise to fail the fire. Cancelling the caller's scope interrupts the turn.
        """


class FireError(Exception):
    """A fire that failed; the message is what the run history and the notice show."""


@attrs.frozen
class FireResult:
    status: str  # ok | error
    response: str
    prompt: str | None
    error: str | None = None
    session_id: str | None = None  # the agent turn's session, whose marks its brief carries

    @property
    def silent(self) -> bool:
        return self.status == "ok" and is_silent(self.response)


@attrs.frozen
class FireContext:
    """How fires run in one home: scripts, outputs, the agent, the cron settings,
    the clock, and where briefs go: the enabled platforms (their home channels), how
    their sessions are keyed (for mirrors), and the Outbox actor to nudge (None in a
    CLI-run fire: a running serve's outbox finds the rows on its next look)."""

    scripts: Path
    output_dir: Path
    spill_dir: Path
    runner: AgentRunner
    config: CronConfig = CronConfig()
    clock: Clock = attrs.field(factory=Clock)
    platforms: Platforms = attrs.field(factory=dict)
    keying: Keying = Keying()
    outbox: Callable[[], Address | None] = lambda: None
    environ: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    policy: EnvPolicy = EnvPolicy()
    script_timeout: float = SCRIPT_TIMEOUT
    lease_watch: float = LEASE_WATCH


@attrs.define(eq=False)
class Fire:
    """A fire in flight: stop it with `cancel(cause, reason)`, which is what its run
    records (lifecycle.interrupt); `done` is set when it ended."""

    claim: Claim
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    cause: Cause = Cause.CANCELLED
    reason: str = "cancelled"
    done: trio.Event = attrs.Factory(trio.Event)

    def cancel(self, cause: Cause, reason: str | None = None) -> None:
        """The first cause wins (a shutdown after a cancel is still a cancel)."""
        if not self.scope.cancel_called:
            self.cause, self.reason = cause, reason or str(cause)
        self.scope.cancel()


def script_path(scripts: Path, name: str) -> Path:
    """The script, which must live under HERMES_HOME/scripts."""
    root = scripts.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise FireError(f"script {name!r} is outside {root}")
    if not path.is_file():
        raise FireError(f"script {name!r} does not exist in {root}")
    return path


def script_argv(path: Path) -> list[str]:
    if path.suffix in (".sh", ".bash"):
        return ["bash", str(path)]
    return [sys.executable, str(path)]


def build_prompt(base: str | None, context: str | None, script_output: str | None) -> str:
    prompt = base or ""
    if script_output is not None:
        prompt += f"\n\n## Script Output\n\n{script_output}"
    if context:
        prompt += f"\n\n## Run Context\n\n{context}"
    return prompt.strip()


async def run_fire(fire: Fire, ctx: FireContext, db: Db) -> str:
    """Run a claimed fire to its end; returns what the run became: ok, error,
    interrupted or stale (refused by the fence: a newer fire owns the job, or a
    cancel came first). A cancel of the caller's scope is recorded and re-raised."""
    claim = fire.claim
    if claim.due_at is not None:
        LATENESS.observe(max(0.0, ctx.clock.now() - claim.due_at))
    outcome = "interrupted"
    try:
        try:
            with fire.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_keep_lease, fire, ctx, db)
                    result = await _execute(claim, ctx)
                    nursery.cancel_scope.cancel()
            if fire.scope.cancelled_caught:
                await _interrupted(fire, ctx, db)
                return outcome
        except BaseException:
            await _interrupted(fire, ctx, db)
            raise
        outcome = await _finish(claim, result, ctx, db)
        return outcome
    finally:
        FIRES.labels(outcome).inc()
        log.info("cron %s run %d: %s", claim.job.id, claim.fence, outcome)
        fire.done.set()


async def _execute(claim: Claim, ctx: FireContext) -> FireResult:
    job = claim.job
    script_output = None
    try:
        if job.script:
            path = script_path(ctx.scripts, job.script)
            cwd = Path(job.workdir) if job.workdir else ctx.scripts
            result = await run_command(
                Launch(tuple(script_argv(path)), cwd, ctx.policy.child_env(ctx.environ)),
                options=RunOptions(timeout=ctx.script_timeout, spill_dir=ctx.spill_dir),
                redactor=Redactor(ctx.policy.secret_values(ctx.environ)),
            )
            if result.exit_code != 0:
                raise FireError(
                    f"script {job.script} exited with status {result.exit_code}:\n"
                    f"{result.output[-2000:]}"
                )
            script_output = result.output
            if job.no_agent:
                return FireResult("ok", script_output, claim.run_context)
        prompt = build_prompt(job.prompt, claim.run_context, script_output)
        stamp = datetime.fromtimestamp(ctx.clock.now(), UTC).strftime("%Y%m%dT%H%M%S")
        session_id = f"cron_{job.id}_{stamp}"
        response = await ctx.runner.run(job, prompt, session_id)
        return FireResult("ok", response, prompt, session_id=session_id)
    except FireError as exc:
        return FireResult("error", str(exc), job.prompt, str(exc))
    except Exception as exc:  # the agent or the provider failed: a failed run, not a crash
        return FireResult("error", f"{type(exc).__name__}: {exc}", job.prompt, str(exc))


async def _keep_lease(fire: Fire, ctx: FireContext, db: Db) -> None:
    """Renew the lease every heartbeat; between renewals, check it is still ours.
    The moment it is not (cancelled anywhere, or taken by a newer fire), cancel."""
    claim, config = fire.claim, ctx.config
    job_id, fence, owner = claim.job.id, claim.fence, claim.owner
    renew_at = trio.current_time() + config.heartbeat_seconds
    held_until = ctx.clock.now() + config.lease_seconds  # as far as this fire knows
    while True:
        await trio.sleep(min(ctx.lease_watch, max(0.0, renew_at - trio.current_time())))
        try:
            if trio.current_time() >= renew_at:
                renew_at = trio.current_time() + config.heartbeat_seconds
                now = ctx.clock.now()
                ours = await db.write(heartbeat, job_id, fence, owner, now, config.lease_seconds)
                held_until = now + config.lease_seconds if ours else held_until
            else:
                ours = await db.read(holds_lease, job_id, fence, owner)
        except StateError as exc:  # state.db busy or being replaced: the lease may stand
            log.warning("cron %s run %d: cannot check its lease: %s", job_id, fence, exc)
            ours = ctx.clock.now() < held_until
        if not ours:
            fire.cancel(Cause.LEASE, LOST)
            return


async def _interrupted(fire: Fire, ctx: FireContext, db: Db) -> None:
    claim = fire.claim
    job_id, fence = claim.job.id, claim.fence
    log.warning("cron %s run %d %s", job_id, fence, fire.reason)
    with trio.CancelScope(shield=True):
        try:
            ours = await db.write(
                interrupt, job_id, fence, fire.cause, fire.reason, ctx.clock.now()
            )
        except StateError as exc:
            log.error("cron %s: cannot record the interruption: %s", job_id, exc)
            return
    if not ours:  # a cancel or an expiry was recorded first, or a newer fire owns the job
        log.warning(
            "cron %s run %d: stale interruption refused; the run keeps what was recorded",
            job_id,
            fence,
        )


async def _finish(claim: Claim, result: FireResult, ctx: FireContext, db: Db) -> str:
    """The output file, the fenced result, then the brief (unless stale or silent)."""
    job, now = claim.job, ctx.clock.now()
    failed = result.status == "error"
    try:
        path = write_output(
            ctx.output_dir, job, claim.fence, now, result.prompt, result.response, failed
        )
        streak = await db.write(
            finish_fire, job.id, claim.fence, result.status, now, result.error, str(path)
        )
    except (StateError, OSError) as exc:
        log.error("cron %s run %d: cannot record the result: %s", job.id, claim.fence, exc)
        return result.status
    if streak is None:
        log.warning("cron %s run %d: stale result refused; not delivered", job.id, claim.fence)
        return "stale"
    if not result.silent:
        text = brief_text(job, result, streak, ctx.config)
        try:
            await db.write(
                queue_brief,
                job,
                claim.fence,
                text,
                ctx.platforms,
                ctx.keying,
                ctx.config.mirror_delivery,
                ctx.clock.now(),
                result.session_id,
            )
        except StateError as exc:  # the run is recorded; the brief is not queued
            log.error("cron %s run %d: cannot queue the brief: %s", job.id, claim.fence, exc)
        nudge(ctx.outbox())
    return result.status


def brief_text(job: Job, result: FireResult, streak: int, config: CronConfig) -> str:
    """The response, or for a failure the notice (with a nudge once a recurring job's
    streak reaches the threshold; one-shots never nudge)."""
    if result.status != "error":
        return result.response
    text = f"Cron job '{job.name}' failed: {result.error}"
    threshold = config.failure_nudge_threshold
    if job.recurring and threshold and streak >= threshold:
        text += (
            f"\n\nThis job has failed {streak} times in a row. "
            f"Review it with `hermes cron edit {job.id}` or pause it."
        )
    return text
