"""`hermes approvals [list [--all]] | approve ID [--always] | deny ID`.

Through the operator actions (hermes.operations.approvals), the same the chat's
buttons and /approve use: with serve running, the waiting turn goes on at once.
"""

from __future__ import annotations

import argparse

from hermes.actors.clock import Clock
from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.approvals import ApproveArgs, DenyArgs, ListArgs
from hermes.state.approvals import APPROVED, PENDING, Approval

NOTHING_PENDING = "no command waits for approval"


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action")
    shown = actions.add_parser("list", help="the requests that wait (the default)")
    shown.add_argument("--all", action="store_true", help="the latest 50, however they ended")
    approve = actions.add_parser("approve", help="let the command of request ID run")
    approve.add_argument("id")
    approve.add_argument(
        "--always", action="store_true", help="and that exact command, for the rest of its session"
    )
    deny = actions.add_parser("deny", help="refuse the command of request ID")
    deny.add_argument("id")
    parser.set_defaults(func=approvals, action="list", all=False)


def approvals(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    if args.action == "list":
        if not home.state_db.exists():  # a read creates nothing
            print(NOTHING_PENDING)
            return exit_codes.OK
        return _list(perform(home, config, "approvals.list", ListArgs(args.all)), args.all)
    if args.action == "approve":
        done: Approval = perform(
            home, config, "approvals.approve", ApproveArgs(args.id, args.always)
        )
    else:
        done = perform(home, config, "approvals.deny", DenyArgs(args.id))
    verb = "approved" if done.state == APPROVED else "denied"
    always = " (and for the rest of its session)" if done.always else ""
    print(f"{verb} {done.id}: {done.command}{always}")
    return exit_codes.OK


def _list(found: list[Approval], everything: bool) -> int:
    if not found:
        print(NOTHING_PENDING if not everything else "no approval requests")
        return exit_codes.OK
    now = Clock().now()
    print(f"{'ID':<8} {'STATE':<10} {'ASKED BY':<28} {'LEFT':>6}  COMMAND (CWD)")
    for a in found:
        left = f"{max(0, a.expires_at - now) / 60:.0f} min" if a.state == PENDING else "-"
        print(f"{a.id:<8} {a.state:<10} {a.asker[:28]:<28} {left:>6}  {a.command} ({a.cwd})")
    return exit_codes.OK
