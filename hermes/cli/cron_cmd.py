"""`hermes cron ...`: scheduled jobs, through the operator actions (hermes.operations.cron).

A change goes to the running serve, whose scheduler re-plans at once; with no
serve it is made in state.db, which serve reads when it starts. `cron run`
fires the job in serve when it runs, else in this process, through the same
fire lifecycle as serve's scheduler (lease, heartbeat, fenced result,
delivery); a `cron cancel` from anywhere reaches it. This module holds the arguments;
hermes.cli.cron_actions what each does.
"""

from __future__ import annotations

import argparse

from hermes.cli import exit_codes
from hermes.home import HermesHome


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
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
    parser.add_argument(
        "--skill",
        dest="skills",
        action="append",
        metavar="NAME",
        help="a skill loaded into each fire's prompt (again for more; edit: the new list)",
    )
    parser.add_argument("--no-catch-up", action="store_true", help="skip runs missed while down")
    parser.add_argument(
        "--attach",
        dest="attach_to_session",
        action=argparse.BooleanOptionalAction,
        help="write each brief into the chat's session, so a reply continues the job"
        " (default: cron.mirror_delivery, for origin targets only)",
    )


READS = ("list", "history", "status")  # these never create state.db


def cron(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    if args.action in READS and not home.state_db.exists():
        return _fresh_home(args)
    from hermes.cli.cron_actions import act  # the actions: only once there is state

    return act(args, home)


def _fresh_home(args: argparse.Namespace) -> int:
    """A read on a home where serve never ran: nothing to show, and nothing is created
    (nor loaded: a script polling an empty home pays for argparse only)."""
    if args.action == "history":
        print(f"hermes: no cron job with id or name {args.job!r} (no state.db yet)")
        return exit_codes.FAILED
    print("no cron jobs (no state.db yet: hermes serve creates it)")
    return exit_codes.OK
