"""What each `hermes cron` command does (its arguments: hermes.cli.cron_cmd): the
operator action it asks for, run where it belongs, and how its result is shown."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.cron.jobs import Job
from hermes.cron.lifecycle import LIVE
from hermes.gateway.pidfile import serve_holds
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import NoArgs
from hermes.operations.cron import (
    AddArgs,
    CancelArgs,
    Cancelled,
    CronStatus,
    EditArgs,
    Fired,
    History,
    HistoryArgs,
    JobArgs,
    ListArgs,
    RunArgs,
)


def _when(ts: float | None, config: Config) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, config.zone()).strftime("%Y-%m-%d %H:%M %Z")


def _job_fields(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "prompt": args.prompt,
        "script": args.script,
        "name": args.name,
        "deliver": args.deliver,
        "repeat": args.repeat,
        "workdir": args.workdir,
        "catch_up": False if args.no_catch_up else None,
        "attach": args.attach_to_session,
        "skills": args.skills,
    }


def _add(args: argparse.Namespace) -> tuple[str, Any]:
    return "cron.add", AddArgs(args.schedule, no_agent=args.no_agent, **_job_fields(args))


def _edit(args: argparse.Namespace) -> tuple[str, Any]:
    no_agent = True if args.no_agent else None
    return "cron.edit", EditArgs(args.job, args.schedule, no_agent=no_agent, **_job_fields(args))


REQUESTS: dict[str, Callable[[argparse.Namespace], tuple[str, Any]]] = {
    "list": lambda a: ("cron.list", ListArgs(True)),  # the ended are counted when not shown
    "add": _add,
    "edit": _edit,
    "pause": lambda a: ("cron.pause", JobArgs(a.job)),
    "resume": lambda a: ("cron.resume", JobArgs(a.job)),
    "rm": lambda a: ("cron.remove", JobArgs(a.job)),
    "run": lambda a: ("cron.run", RunArgs(a.job, a.prompt)),
    "cancel": lambda a: ("cron.cancel", CancelArgs(a.job)),
    "history": lambda a: ("cron.history", HistoryArgs(a.job, a.limit)),
    "status": lambda a: ("cron.status", NoArgs()),
}


def _list(jobs: list[Job], args: argparse.Namespace, config: Config) -> int:
    shown = jobs if args.all else [j for j in jobs if j.state in LIVE]
    ended = len(jobs) - len(shown)
    if not shown:
        ended_note = f"; {ended} ended (see hermes cron list --all)" if ended else ""
        print(f"no cron jobs scheduled or paused{ended_note}" if ended else "no cron jobs")
        return exit_codes.OK
    print(f"{'ID':<13} {'NAME':<24} {'SCHEDULE':<26} {'NEXT RUN':<22} {'ZONE':<20} STATUS")
    for job in shown:
        status = job.state if job.state != "scheduled" else (job.last_status or "scheduled")
        if job.failure_streak >= 2:
            status += f" ({job.failure_streak} failures in a row)"
        print(
            f"{job.id:<13} {job.name[:24]:<24} {job.schedule_display[:26]:<26} "
            f"{_when(job.next_run_at, config):<22} {job.zone or '-':<20} {status}"
        )
    if ended:
        print(f"({ended} ended job{'s' if ended > 1 else ''} not shown: hermes cron list --all)")
    return exit_codes.OK


def _added(job: Job, args: argparse.Namespace, config: Config) -> int:
    nxt = _when(job.next_run_at, config)
    print(f"added {job.id} '{job.name}' ({job.schedule_display}); next run {nxt}")
    return exit_codes.OK


def _edited(job: Job, args: argparse.Namespace, config: Config) -> int:
    print(f"updated {job.id} '{job.name}'; next run {_when(job.next_run_at, config)}")
    return exit_codes.OK


def _paused(job: Job, args: argparse.Namespace, config: Config) -> int:
    print(f"{job.id} '{job.name}' is {job.state}; next run {_when(job.next_run_at, config)}")
    return exit_codes.OK


def _removed(job: Job, args: argparse.Namespace, config: Config) -> int:
    print(f"removed {job.id} '{job.name}'")
    return exit_codes.OK


def _fired(fired: Fired, args: argparse.Namespace, config: Config) -> int:
    print(
        f"firing {fired.job} (run {fired.run}) in the running serve;"
        f" `hermes cron history {fired.job}` shows how it went"
    )
    return exit_codes.OK


def _cancelled(done: Cancelled, args: argparse.Namespace, config: Config) -> int:
    where = "in the running serve" if done.runs else "it stops within a second, wherever it runs"
    print(f"cancelled the running fire of {done.job}; {where}")
    return exit_codes.OK


def _history(history: History, args: argparse.Namespace, config: Config) -> int:
    for record in history.runs:
        run = record.run
        line = f"{_when(run.started_at, config):<22} run {run.fence or '-':<5} {run.status:<12}"
        if run.error:
            line += f" {run.error.splitlines()[0][:80]}"
        print(line)
        if run.delivery_error:
            print(f"    delivery: {run.delivery_error}")
        for t in record.targets:
            why = t.provenance + (", mirrored" if t.mirrored else "")
            print(f"    -> {t.target} ({why}): {t.outcome}")
    return exit_codes.OK


def _status(status: CronStatus, args: argparse.Namespace, config: Config) -> int:
    nxt = f"{status.next_job} at {_when(status.next_at, config)}" if status.next_job else None
    shown = {
        "jobs": status.jobs,
        "scheduled": status.scheduled,
        "paused": status.paused,
        "running": status.running,
        "next": nxt,
    }
    print(json.dumps(shown, indent=2))
    return exit_codes.OK


SHOW: dict[str, Callable[[Any, argparse.Namespace, Config], int]] = {
    "list": _list,
    "add": _added,
    "edit": _edited,
    "pause": _paused,
    "resume": _paused,
    "rm": _removed,
    "run": _fired,
    "cancel": _cancelled,
    "history": _history,
    "status": _status,
}


def act(args: argparse.Namespace, home: HermesHome) -> int:
    """The command's action, run where it belongs (hermes.cli.act), and its result shown."""
    config = load_config(home.config_path, Config, SECTIONS)
    if args.action == "run" and not serve_holds(home.serve_pid):
        from hermes.cli.cron_here import run_here  # serve's tree, the agent: only here

        return run_here(args, home, config)
    name, request = REQUESTS[args.action](args)
    return SHOW[args.action](perform(home, config, name, request), args, config)
