"""`hermes cron ...`: manage scheduled jobs in state.db.

Changes are written straight into state.db; a running serve picks them up
within its poll interval (5 s). `cron run` fires a job in this process,
through the same fire lifecycle as serve's scheduler (lease, heartbeat,
fenced result, delivery); a `cron cancel` from anywhere reaches it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from datetime import datetime
from typing import Any

import apsw
import trio

from hermes.adapters.registry import SECTIONS
from hermes.agent.cron_runner import cron_fire_context
from hermes.agent.loop import Agent
from hermes.agent.providers import build_agent
from hermes.cli import exit_codes
from hermes.config import Config, load_config
from hermes.cron.fire import Fire, run_fire
from hermes.cron.injection import check as injection_check
from hermes.cron.schedule import parse_schedule
from hermes.cron.store import (
    NewJob,
    TargetRecord,
    cancel_job,
    claim_now,
    create_job,
    get_job,
    list_jobs,
    remove_job,
    resolve_job,
    run_history,
    run_targets,
    set_paused,
    update_job,
)
from hermes.delivery.outbox_store import message_state
from hermes.gateway.tree import ServeKeys
from hermes.home import HermesHome
from hermes.state.db import Db
from hermes.state.maintenance import has_table, open_for_writing, open_plain
from hermes.state.registry import Registry
from hermes.state.schema import immediate
from hermes.terminal.env import EnvPolicy
from hermes.terminal.leftovers import kill_leftovers, mark_trees
from hermes.terminal.reaper import become_subreaper


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("cron", help="scheduled jobs")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="jobs that are scheduled or paused")
    listing.add_argument("--all", action="store_true", help="completed and failed jobs too")
    add = actions.add_parser("add", help="add a job")
    add.add_argument("schedule", help="'every 30m', 'weekdays at 9:30', '0 9 * * 1-5', ...")
    _job_options(add)
    edit = actions.add_parser("edit", help="change a job")
    edit.add_argument("job", help="id or unique name")
    edit.add_argument("--schedule")
    _job_options(edit)
    for name, text in (("pause", "stop firing"), ("resume", "fire again"), ("rm", "delete")):
        one = actions.add_parser(name, help=f"{text} a job")
        one.add_argument("job", help="id or unique name")
    run = actions.add_parser("run", help="fire a job now, in this process")
    run.add_argument("job", help="id or unique name")
    run.add_argument("--prompt", help="extra context for this fire only (## Run Context)")
    cancel = actions.add_parser("cancel", help="cancel a running fire, wherever it runs")
    cancel.add_argument("job", help="id or unique name")
    history = actions.add_parser("history", help="a job's recent runs")
    history.add_argument("job", help="id or unique name")
    history.add_argument("--limit", type=int, default=20)
    actions.add_parser("status", help="jobs, running fires, the next run")
    parser.set_defaults(func=cron)


def _job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name")
    parser.add_argument("--prompt")
    parser.add_argument("--script", help="a file under HERMES_HOME/scripts")
    parser.add_argument("--no-agent", action="store_true", help="the script's output is the result")
    parser.add_argument("--deliver", help="origin, local, telegram, telegram:CHAT[:THREAD], all")
    parser.add_argument("--repeat", type=int, help="fire this many times, then complete")
    parser.add_argument("--workdir")
    parser.add_argument("--no-catch-up", action="store_true", help="skip runs missed while down")
    parser.add_argument(
        "--attach", dest="attach_to_session", action=argparse.BooleanOptionalAction,
        help="write each brief into the chat's session, so a reply continues the job"
        " (default: cron.mirror_delivery, for origin targets only)",
    )  # fmt: skip


def _when(ts: float | None, config: Config) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, config.zone()).strftime("%Y-%m-%d %H:%M %Z")


READS = ("list", "history", "status")  # these never create state.db


def cron(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, SECTIONS)
    if args.action in READS:
        if not home.state_db.exists():
            return _fresh_home(args)
        conn = open_plain(home.state_db)
    else:
        home.ensure()
        if args.action == "run":
            return _run(args, home, config)
        conn = open_for_writing(home.state_db)
    try:
        return ACTIONS[args.action](conn, args, home, config)
    finally:
        conn.close()


def _fresh_home(args: argparse.Namespace) -> int:
    """A read on a home where serve never ran: nothing to show, and nothing is created."""
    if args.action == "history":
        print(f"hermes: no cron job with id or name {args.job!r} (no state.db yet)")
        return exit_codes.FAILED
    print("no cron jobs (no state.db yet: hermes serve creates it)")
    return exit_codes.OK


def _write(conn: apsw.Connection, fn, *args: Any) -> Any:
    with immediate(conn):
        return fn(conn, *args)


def _list(conn, args, home, config) -> int:
    jobs = list_jobs(conn, args.all)
    if not jobs:
        print("no cron jobs")
        return exit_codes.OK
    print(f"{'ID':<13} {'NAME':<24} {'SCHEDULE':<26} {'NEXT RUN':<22} STATUS")
    for job in jobs:
        status = job.state if job.state != "scheduled" else (job.last_status or "scheduled")
        if job.failure_streak >= 2:
            status += f" ({job.failure_streak} failures in a row)"
        print(
            f"{job.id:<13} {job.name[:24]:<24} {job.schedule_display[:26]:<26} "
            f"{_when(job.next_run_at, config):<22} {status}"
        )
    return exit_codes.OK


def _new_fields(args, config: Config) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in ("name", "prompt", "script", "deliver", "workdir"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    if args.no_agent:
        fields["no_agent"] = True
    if args.repeat is not None:
        fields["repeat_times"] = args.repeat
    if args.no_catch_up:
        fields["catch_up"] = False
    if args.attach_to_session is not None:
        fields["attach_to_session"] = args.attach_to_session
    return fields


def _add(conn, args, home, config) -> int:
    fields = _new_fields(args, config)
    schedule = parse_schedule(args.schedule, config.zone(), time.time())
    name = fields.pop("name", None) or (fields.get("prompt") or fields.get("script") or "job")[:40]
    job = _write(conn, create_job, NewJob(name, schedule, **fields), time.time(), config.zone())
    nxt = _when(job.next_run_at, config)
    print(f"added {job.id} '{job.name}' ({job.schedule_display}); next run {nxt}")
    return exit_codes.OK


def _edit(conn, args, home, config) -> int:
    fields = _new_fields(args, config)
    if args.schedule:
        fields["schedule"] = parse_schedule(args.schedule, config.zone(), time.time())
    job = resolve_job(conn, args.job)
    job = _write(conn, lambda c: update_job(c, job.id, time.time(), config.zone(), **fields))
    print(f"updated {job.id} '{job.name}'; next run {_when(job.next_run_at, config)}")
    return exit_codes.OK


def _pause(conn, args, home, config, paused: bool = True) -> int:
    job = resolve_job(conn, args.job)
    job = _write(conn, set_paused, job.id, paused, time.time(), config.zone())
    print(f"{job.id} '{job.name}' is {job.state}; next run {_when(job.next_run_at, config)}")
    return exit_codes.OK


def _rm(conn, args, home, config) -> int:
    job = resolve_job(conn, args.job)
    _write(conn, remove_job, job.id)
    print(f"removed {job.id} '{job.name}'")
    return exit_codes.OK


def _cancel(conn, args, home, config) -> int:
    job = _write(conn, cancel_job, args.job, time.time())
    print(f"cancelled the running fire of {job.id}; it stops within a second, wherever it runs")
    return exit_codes.OK


def _history(conn, args, home, config) -> int:
    job = resolve_job(conn, args.job)
    targets: dict[int, list[TargetRecord]] = {}
    if has_table(conn, "cron_deliveries"):
        for record in run_targets(conn, job.id):
            targets.setdefault(record.fence, []).append(record)
    for run in run_history(conn, job.id, args.limit):
        line = f"{_when(run.started_at, config):<22} run {run.fence or '-':<5} {run.status:<12}"
        if run.error:
            line += f" {run.error.splitlines()[0][:80]}"
        print(line)
        if run.delivery_error:
            print(f"    delivery: {run.delivery_error}")
        for record in targets.get(run.fence, []):
            print(f"    -> {_outcome(conn, record)}")
    return exit_codes.OK


def _outcome(conn, record: TargetRecord) -> str:
    """One target of a run: where, why, and how its delivery went (the outbox's state of
    the brief's rows, and what the mirror seeded)."""
    why = record.provenance + (", mirrored" if record.mirror else "")
    line = f"{record.target} ({why}): "
    found = None
    if record.outbox_key and has_table(conn, "outbox"):
        found = message_state(conn, record.outbox_key)
    if found is not None:
        state, error, mirrored = found
        line += state + (f": {error}" if error else "") + (f"; {mirrored}" if mirrored else "")
    elif record.status == "queued":
        line += "no longer in the outbox (sent rows are kept retention.outbox_sent_days)"
    else:
        line += record.status
    if record.note and record.note not in line:
        line += f" [{record.note}]"
    return line


def _status(conn, args, home, config) -> int:
    jobs = list_jobs(conn, True)
    running = [j for j in jobs if j.running_fence is not None]
    scheduled = [j for j in jobs if j.state == "scheduled" and j.next_run_at]
    nxt = min(scheduled, key=lambda j: j.next_run_at) if scheduled else None
    print(
        json.dumps(
            {
                "jobs": len(jobs),
                "scheduled": len(scheduled),
                "paused": sum(j.state == "paused" for j in jobs),
                "running": [f"{j.id}#{j.running_fence} ({j.lease_owner})" for j in running],
                "next": f"{nxt.id} at {_when(nxt.next_run_at, config)}" if nxt else None,
            },
            indent=2,
        )
    )
    return exit_codes.OK


def _run(args: argparse.Namespace, home: HermesHome, config: Config) -> int:
    """Fire now, in this process, with the configured model (its state.db writer is
    this process's only one: no plain connection is open meanwhile)."""
    injection_check(args.prompt, "run context")
    keys = ServeKeys.load(home, config)  # what serve holds: kept out, redacted, as in serve
    agent = build_agent(config, keys.secrets, keys.redact)
    become_subreaper()  # a script's double-forked children stay ours to kill
    mark_trees(home.root)
    return trio.run(_fire_now, args, home, config, agent, keys.policy)


async def _fire_now(
    args: argparse.Namespace, home: HermesHome, config: Config, agent: Agent, policy: EnvPolicy
) -> int:
    registry = Registry()
    async with trio.open_nursery() as nursery:
        await nursery.start(registry.run)
        try:
            async with Db(registry, home.state_db) as db:
                await kill_leftovers(home.root)
                return await _fire_with(db, registry, args, home, config, agent, policy)
        finally:
            registry.request_drain(trio.current_time() + 30)


async def _fire_with(db: Db, registry: Registry, args, home, config, agent, policy) -> int:
    owner = f"cli:{os.getpid()}"
    lease = config.cron.lease_seconds
    claim = await db.write(claim_now, args.job, owner, time.time(), lease, args.prompt)
    ctx = cron_fire_context(agent, registry, home, config.zone(), config, policy)
    fire = Fire(claim)
    print(f"firing {claim.job.id} (run {claim.fence}) ...", flush=True)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    fire.cancel(f"interrupted: hermes cron run got {signal.Signals(signum).name}")

            nursery.start_soon(on_signal)
            status = await run_fire(fire, ctx, db)
            nursery.cancel_scope.cancel()
    job = await db.read(get_job, claim.job.id)
    run = next(r for r in await db.read(run_history, claim.job.id) if r.fence == claim.fence)
    if status in ("ok", "error") and run.output_path:
        print(await trio.Path(run.output_path).read_text(encoding="utf-8"))
    print(f"[{run.status}; run {claim.fence} of {job.id if job else claim.job.id}]"
          + (f" {run.error}" if run.error and status != "error" else ""))  # fmt: skip
    return exit_codes.OK if status == "ok" else exit_codes.FAILED


ACTIONS = {
    "list": _list,
    "add": _add,
    "edit": _edit,
    "pause": _pause,
    "resume": lambda conn, args, home, config: _pause(conn, args, home, config, False),
    "rm": _rm,
    "cancel": _cancel,
    "history": _history,
    "status": _status,
}
