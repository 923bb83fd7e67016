"""cronjob: scheduled jobs from a conversation. A job made from a chat delivers
back to it (its origin); the model may not pin a provider or a model.

A job runs with its maker's role. A user who is not an owner sees, changes and
runs only the jobs they made, and only jobs that deliver to their own chat."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.agent.tools.asking import lasting
from hermes.agent.tools.base import ToolContext, ToolError, need, obj
from hermes.agent.tools.skills import library_of
from hermes.cron.injection import InjectionRefused
from hermes.cron.jobs import Job
from hermes.cron.schedule import ScheduleError, parse_schedule
from hermes.cron.scheduler import JobsChanged, RunNow
from hermes.cron.store import (
    JobBusy,
    JobError,
    NewJob,
    create_job,
    list_jobs,
    remove_job,
    resolve_job,
    set_paused,
    update_job,
)

PINS = ("model", "provider")


@attrs.frozen
class CronjobTool:
    name = "cronjob"
    description = (
        "Create, list, update, pause, resume, remove or run scheduled jobs. Schedules: "
        "'every 30m', 'every day at 9am', 'weekdays at 9:30', a cron expression, 'in 2h'. "
        "A job made here reports back to this chat."
    )
    parameters = obj(
        ["action"],
        action={
            "type": "string",
            "enum": ["create", "list", "update", "pause", "resume", "remove", "run"],
        },
        job={"type": "string", "description": "id or name (all actions but create and list)"},
        schedule={"type": "string"},
        prompt={"type": "string"},
        name={"type": "string"},
        deliver={"type": "string", "description": "default: origin (this chat)"},
        attach_to_session={
            "type": "boolean",
            "description": "write each brief into this chat's conversation, so a reply"
            " continues the job",
        },
        skills={
            "type": "array",
            "items": {"type": "string"},
            "description": "skills loaded into each fire's prompt (update: the new list)",
        },
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        pinned = [p for p in PINS if p in args]
        if pinned:
            raise ToolError(f"jobs cannot pin {', '.join(pinned)}; the configured model runs them")
        action = need(args, "action")
        if action in ("create", "update", "resume"):  # what fires later, unasked
            named = ("job", "schedule", "prompt", "deliver", "skills")
            said = " · ".join(f"{k}: {args[k]}" for k in named if args.get(k))
            refused = await lasting(ctx, "a scheduled job", f"cronjob {action} · {said}")
            if refused is not None:
                return refused
        try:
            result = await self._act(action, args, ctx)
        except (JobError, JobBusy, ScheduleError, InjectionRefused) as exc:
            raise ToolError(str(exc)) from None
        if ctx.scheduler is not None and args["action"] in ("create", "update", "resume"):
            await ctx.scheduler.cast(JobsChanged())
        return json.dumps(result)

    async def _act(self, action: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        now = ctx.clock.now()
        caller = ctx.caller
        if not caller.is_owner and args.get("deliver") not in (None, "", "origin"):
            raise ToolError("your jobs deliver to this chat only (deliver: origin)")
        if action == "create":
            prompt = need(args, "prompt")
            schedule = parse_schedule(need(args, "schedule"), ctx.tz, now)
            new = NewJob(
                args.get("name") or prompt[:40],
                schedule,
                prompt=prompt,
                deliver=args.get("deliver") or "origin",
                origin=ctx.origin,
                attach_to_session=_flag(args, "attach_to_session"),
                role=caller.role,
                skills=_skills(args, ctx),
            )
            job = await ctx.db.write(create_job, new, now, ctx.tz)
            return {"created": job.id, "name": job.name, "next_run_at": job.next_run_at}
        if action == "list":
            jobs = [j for j in await ctx.db.read(list_jobs) if _yours(j, ctx)]
            return [
                {
                    "id": j.id,
                    "name": j.name,
                    "schedule": j.schedule_display,
                    "state": j.state,
                    "next_run_at": j.next_run_at,
                }
                for j in jobs
            ]
        ref = need(args, "job")
        job = await ctx.db.read(resolve_job, ref)
        if not _yours(job, ctx):
            raise JobError(f"no cron job with id or name {ref!r}")  # others' are not shown
        if action == "update":
            fields: dict[str, Any] = {}
            if args.get("prompt"):
                fields["prompt"] = args["prompt"]
            if args.get("name"):
                fields["name"] = args["name"]
            if args.get("deliver"):
                fields["deliver"] = args["deliver"]
            if args.get("schedule"):
                fields["schedule"] = parse_schedule(args["schedule"], ctx.tz, now)
            if _flag(args, "attach_to_session") is not None:
                fields["attach_to_session"] = args["attach_to_session"]
            if args.get("skills") is not None:
                fields["skills"] = _skills(args, ctx)
            updated = await ctx.db.write(update_job, job.id, now, ctx.tz, **fields)
            return {"updated": updated.id, "next_run_at": updated.next_run_at}
        if action in ("pause", "resume"):
            changed = await ctx.db.write(set_paused, job.id, action == "pause", now, ctx.tz)
            return {"id": changed.id, "state": changed.state}
        if action == "remove":
            await ctx.db.write(remove_job, job.id)
            return {"removed": job.id}
        if action == "run":
            if ctx.scheduler is None:
                raise ToolError("the scheduler is not running here")
            job_id, fence = await ctx.scheduler.call(RunNow(job.id))
            return {"fired": job_id, "run": fence}
        raise ToolError(f"unknown action {action!r}")


def _skills(args: dict[str, Any], ctx: ToolContext) -> tuple[str, ...]:
    """The skills a job made here loads: names of skills the caller has now (each fire
    checks again, as the job's maker)."""
    names = args.get("skills") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ToolError("skills must be a list of skill names")
    if not names:
        return ()
    return tuple(library_of(ctx).find(ctx.caller, n).name for n in dict.fromkeys(names))


def _yours(job: Job, ctx: ToolContext) -> bool:
    """Whether the caller may see and act on the job: an owner every job, a user theirs."""
    return ctx.caller.is_owner or job.made_by(ctx.caller.platform, ctx.caller.user_id)


def _flag(args: dict[str, Any], name: str) -> bool | None:
    value = args.get(name)
    if value is not None and not isinstance(value, bool):
        raise ToolError(f"{name} must be true or false, got {value!r}")
    return value
