"""`hermes outbox [--dead] | retry ID | drop ID | purge --dead`: what waits to leave, and
what died. Through the operator actions (hermes.operations.outbox): a retried row
goes out at once when serve runs, else when it starts."""

from __future__ import annotations

import argparse
from datetime import datetime

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import NoArgs
from hermes.operations.outbox import ListArgs, Purged, RowArgs, RowState, RowView

TEXT_WIDTH = 40


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    parser.add_argument("--dead", action="store_true", help="only dead and unknown rows")
    actions = parser.add_subparsers(dest="action")
    again = actions.add_parser("retry", help="send a dead or unknown row again")
    again.add_argument("id", type=int)
    drop = actions.add_parser("drop", help="forget a dead or unknown row: it is not sent")
    drop.add_argument("id", type=int)
    purge = actions.add_parser("purge", help="delete dead rows")
    purge.add_argument("--dead", action="store_true", required=True, dest="purge_dead")
    parser.set_defaults(func=outbox)


def outbox(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    if args.action is None:
        rows = []
        if home.state_db.exists():  # a read creates nothing
            rows = perform(home, config, "outbox.list", ListArgs(args.dead))
        return _list(rows, args.dead)
    if args.action == "purge":
        purged: Purged = perform(home, config, "outbox.purge", NoArgs())
        print(f"deleted {purged.rows} dead row{'s' if purged.rows != 1 else ''}")
        return exit_codes.OK
    done: RowState = perform(home, config, f"outbox.{args.action}", RowArgs(args.id))
    print(f"row {done.id} goes out again" if done.state == "pending" else f"row {done.id} dropped")
    return exit_codes.OK


def _list(rows: list[RowView], dead_only: bool) -> int:
    if not rows:
        print("no dead letters" if dead_only else "the outbox is empty")
        return exit_codes.OK
    print(
        f"{'ID':>6} {'STATE':<8} {'TO':<28} {'KIND':<7} {'TRIES':>5} {'CREATED':<16} TEXT / ERROR"
    )
    for r in rows:
        created = datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M")
        text = r.text.replace("\n", " ")
        text = text if len(text) <= TEXT_WIDTH else text[: TEXT_WIDTH - 3] + "..."
        line = f"{r.id:>6} {r.state:<8} {r.to:<28} {r.kind:<7} {r.attempts:>5} {created:<16} {text}"
        print(line + (f"  [{r.error}]" if r.error else ""))
    return exit_codes.OK
