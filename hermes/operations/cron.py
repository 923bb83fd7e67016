"""Cron jobs: list, history, status, add, edit, pause, resume, remove, run, cancel.

A change commits in state.db and then tells the live scheduler (when serve
runs), so it re-plans at once: a job added for "in 2s" fires in 2 s, not at
the next look. Running a job now happens in serve's scheduler; with no serve,
`hermes cron run` fires it in its own process (hermes.cli.cron_cmd).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from hermes.actors.errors import Invalid
from hermes.agent.skills.card import check_name
from hermes.config import not_blank
from hermes.cron.injection import check as injection_check
from hermes.cron.jobs import Job, Run
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import (
    NewJob,
    TargetRecord,
    cancel_job,
    create_job,
    list_jobs,
    remove_job,
    resolve_job,
    run_history,
    run_targets,
    set_paused,
    update_job,
)
from hermes.delivery.outbox_store import message_state
from hermes.delivery.targets import Origin
from hermes.operations.context import NoArgs, Operation, Ops, count

MAX_RUNS = 1000


@attrs.frozen
class ListArgs:
    all: bool = False  # completed and failed jobs too


@attrs.frozen
class JobArgs:
    job: str = attrs.field(validator=not_blank)  # an id or a unique name


@attrs.frozen
class HistoryArgs:
    job: str = attrs.field(validator=not_blank)
    limit: int = attrs.field(default=20, validator=count(1, MAX_RUNS))


def _skill_names(names: Iterable[str] | None) -> tuple[str, ...] | None:
    """The skills a job loads, each a name a skill can have (whether the job's maker has
    it is decided at each fire, where the skill is loaded); None: not named."""
    if names is None:
        return None
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise Invalid("skills: a list of skill names")
    return tuple(check_name(n) for n in dict.fromkeys(names))


@attrs.frozen
class AddArgs:
    schedule: str = attrs.field(validator=not_blank)
    prompt: str | None = None
    script: str | None = None  # a file under HERMES_HOME/scripts
    name: str | None = None
    deliver: str | None = None  # default: the session's chat, else local
    no_agent: bool = False
    repeat: int | None = attrs.field(default=None, validator=count(1))
    workdir: str | None = None
    catch_up: bool | None = None
    attach: bool | None = None
    session: str | None = attrs.field(default=None, validator=not_blank)  # a local session
    skills: tuple[str, ...] | None = attrs.field(default=None, converter=_skill_names)


@attrs.frozen
class EditArgs:
    job: str = attrs.field(validator=not_blank)
    schedule: str | None = attrs.field(default=None, validator=not_blank)
    prompt: str | None = None
    script: str | None = None
    name: str | None = None
    deliver: str | None = None
    no_agent: bool | None = None
    repeat: int | None = attrs.field(default=None, validator=count(1))
    workdir: str | None = None
    catch_up: bool | None = None
    attach: bool | None = None
    skills: tuple[str, ...] | None = attrs.field(default=None, converter=_skill_names)


@attrs.frozen
class RunArgs:
    job: str = attrs.field(validator=not_blank)
    prompt: str | None = None  # extra context for this fire only


@attrs.frozen
class CancelArgs:
    job: str = attrs.field(validator=not_blank)
    run: int | None = None  # one run's fence; default: every running fire of the job


@attrs.frozen
class TargetOutcome:
    target: str
    provenance: str
    mirrored: bool
    outcome: str  # how its delivery went, in words


@attrs.frozen
class RunRecord:
    run: Run
    targets: list[TargetOutcome]


@attrs.frozen
class History:
    job: Job
    runs: list[RunRecord]


@attrs.frozen
class CronStatus:
    jobs: int
    scheduled: int
    paused: int
    running: list[str]  # job#fence (owner)
    next_job: str | None
    next_at: float | None


@attrs.frozen
class Fired:
    job: str
    run: int


@attrs.frozen
class Cancelled:
    job: str
    runs: list[str]  # job#fence of each fire cancelled in serve; empty: its lease was revoked


async def list_cron(ops: Ops, args: ListArgs) -> list[Job]:
    return await ops.db.read(list_jobs, args.all)


async def cron_history(ops: Ops, args: HistoryArgs) -> History:
    def read(conn) -> History:
        job = resolve_job(conn, args.job)
        targets: dict[int, list[TargetOutcome]] = {}
        for record in run_targets(conn, job.id):
            targets.setdefault(record.fence, []).append(_outcome(conn, record))
        runs = run_history(conn, job.id, args.limit)
        return History(job, [RunRecord(r, targets.get(r.fence, [])) for r in runs])

    return await ops.db.read(read)


def _outcome(conn, record: TargetRecord) -> TargetOutcome:
    """How one target of a run fared: the outbox's state of the brief's rows, and what
    the mirror seeded."""
    found = message_state(conn, record.outbox_key) if record.outbox_key else None
    if found is not None:
        state, error, mirrored = found
        line = state + (f": {error}" if error else "") + (f"; {mirrored}" if mirrored else "")
    elif record.status == "queued":
        line = "no longer in the outbox (sent rows are kept retention.outbox_sent_days)"
    else:
        line = record.status
    if record.note and record.note not in line:
        line += f" [{record.note}]"
    return TargetOutcome(record.target, record.provenance, record.mirror, line)


async def cron_status(ops: Ops, args: NoArgs) -> CronStatus:
    jobs = await ops.db.read(list_jobs, True)
    scheduled = [j for j in jobs if j.state == "scheduled" and j.next_run_at]
    nxt = min(scheduled, key=lambda j: j.next_run_at) if scheduled else None
    return CronStatus(
        jobs=len(jobs),
        scheduled=len(scheduled),
        paused=sum(j.state == "paused" for j in jobs),
        running=[
            f"{j.id}#{j.running_fence} ({j.lease_owner})"
            for j in jobs
            if j.running_fence is not None
        ],
        next_job=nxt.id if nxt else None,
        next_at=nxt.next_run_at if nxt else None,
    )


def _fields(args: AddArgs | EditArgs) -> dict[str, Any]:
    """The job fields an add or an edit names (None: not named)."""
    named = {
        "prompt": args.prompt,
        "script": args.script,
        "deliver": args.deliver,
        "workdir": args.workdir,
        "no_agent": args.no_agent,
        "repeat_times": args.repeat,
        "catch_up": args.catch_up,
        "attach_to_session": args.attach,
        "skills": args.skills,
    }
    return {k: v for k, v in named.items() if v is not None}


async def add_cron(ops: Ops, args: AddArgs) -> Job:
    now = ops.clock.now()
    schedule = parse_schedule(args.schedule, ops.tz, now)
    fields = _fields(args)
    fields["no_agent"] = args.no_agent
    origin = Origin("local", args.session, chat_type="dm") if args.session else None
    fields.setdefault("deliver", "origin" if origin else "local")
    name = args.name or (args.prompt or args.script or "job")[:40]
    new = NewJob(name, schedule, origin=origin, **fields)
    job = await ops.db.write(create_job, new, now, ops.tz)
    await ops.live.jobs_changed()
    return job


async def edit_cron(ops: Ops, args: EditArgs) -> Job:
    now = ops.clock.now()
    fields = _fields(args)
    if args.name is not None:
        fields["name"] = args.name
    if args.schedule is not None:
        fields["schedule"] = parse_schedule(args.schedule, ops.tz, now)
    if not fields:
        raise Invalid("nothing to change: name what to edit (--schedule, --prompt, ...)")

    def edit(conn) -> Job:
        return update_job(conn, resolve_job(conn, args.job).id, now, ops.tz, **fields)

    job = await ops.db.write(edit)
    await ops.live.jobs_changed()
    return job


async def _pause(ops: Ops, ref: str, paused: bool) -> Job:
    now = ops.clock.now()
    job = await ops.db.write(
        lambda conn: set_paused(conn, resolve_job(conn, ref).id, paused, now, ops.tz)
    )
    await ops.live.jobs_changed()
    return job


async def pause_cron(ops: Ops, args: JobArgs) -> Job:
    return await _pause(ops, args.job, True)


async def resume_cron(ops: Ops, args: JobArgs) -> Job:
    return await _pause(ops, args.job, False)


async def remove_cron(ops: Ops, args: JobArgs) -> Job:
    def remove(conn) -> Job:
        job = resolve_job(conn, args.job)
        remove_job(conn, job.id)
        return job

    job = await ops.db.write(remove)
    await ops.live.jobs_changed()
    return job


async def run_cron(ops: Ops, args: RunArgs) -> Fired:
    injection_check(args.prompt, "run context")
    job_id, fence = await ops.live.run_job(args.job, args.prompt)
    return Fired(job_id, fence)


async def cancel_cron(ops: Ops, args: CancelArgs) -> Cancelled:
    """Cancel in serve's scheduler when it runs the fire; otherwise revoke the fire's
    lease, which its worker (a `hermes cron run` elsewhere) sees within a heartbeat."""
    runs = await ops.live.cancel_fires(args.job, args.run)
    if runs:
        return Cancelled(runs[0].split("#")[0], runs)
    job = await ops.db.write(cancel_job, args.job, ops.clock.now())
    return Cancelled(job.id, [])


OPERATIONS = (
    Operation("cron.list", ListArgs, list[Job], list_cron),
    Operation("cron.history", HistoryArgs, History, cron_history),
    Operation("cron.status", NoArgs, CronStatus, cron_status),
    Operation("cron.add", AddArgs, Job, add_cron, changes=True),
    Operation("cron.edit", EditArgs, Job, edit_cron, changes=True),
    Operation("cron.pause", JobArgs, Job, pause_cron, changes=True),
    Operation("cron.resume", JobArgs, Job, resume_cron, changes=True),
    Operation("cron.remove", JobArgs, Job, remove_cron, changes=True),
    Operation("cron.run", RunArgs, Fired, run_cron, changes=True),
    Operation("cron.cancel", CancelArgs, Cancelled, cancel_cron, changes=True),
)
