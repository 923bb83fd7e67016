"""`hermes outbox [--dead] | retry ID | purge --dead`: what waits to leave, and what died.

Written straight into state.db; a running serve's outbox sends a retried row
when it next looks (within 30 seconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime

from hermes.cli import exit_codes
from hermes.delivery.outbox_store import listing, purge_dead, retry_row
from hermes.home import HermesHome
from hermes.state.maintenance import has_table, open_for_writing, open_plain
from hermes.state.schema import immediate


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("outbox", help="messages waiting to be sent, and dead letters")
    parser.add_argument("--dead", action="store_true", help="only dead and unknown rows")
    actions = parser.add_subparsers(dest="action")
    again = actions.add_parser("retry", help="send a dead or unknown row again")
    again.add_argument("id", type=int)
    purge = actions.add_parser("purge", help="delete dead rows")
    purge.add_argument("--dead", action="store_true", required=True, dest="purge_dead")
    parser.set_defaults(func=outbox)


def outbox(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    if args.action is None:
        return _list(home, args.dead)
    home.ensure()
    conn = open_for_writing(home.state_db)
    try:
        with immediate(conn):
            if args.action == "retry":
                done = retry_row(conn, args.id, time.time())
            else:
                done = purge_dead(conn)
    finally:
        conn.close()
    if args.action == "retry":
        if not done:
            print(f"hermes: no dead or unknown outbox row {args.id}", file=sys.stderr)
            return exit_codes.FAILED
        print(f"row {args.id} goes out again")
    else:
        print(f"deleted {done} dead row{'s' if done != 1 else ''}")
    return exit_codes.OK


def _list(home: HermesHome, dead_only: bool) -> int:
    """Read-only: a home where serve never ran creates nothing and shows nothing."""
    rows = []
    if home.state_db.exists():
        conn = open_plain(home.state_db)
        try:
            rows = listing(conn, dead_only) if has_table(conn, "outbox") else []
        finally:
            conn.close()
    if not rows:
        print("no dead letters" if dead_only else "the outbox is empty")
        return exit_codes.OK
    print(
        f"{'ID':>6} {'STATE':<8} {'TO':<28} {'KIND':<7} {'TRIES':>5} {'CREATED':<16} TEXT / ERROR"
    )
    for r in rows:
        created = datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M")
        text = r.text.replace("\n", " ")
        text = text if len(text) <= 40 else text[:37] + "..."
        line = _line(str(r.id), r.state, str(r.target), r.kind, str(r.attempts), created, text)
        print(line + (f"  [{r.last_error}]" if r.last_error else ""))
    return exit_codes.OK


def _line(row: str, state: str, to: str, kind: str, tries: str, created: str, text: str) -> str:
    return f"{row:>6} {state:<8} {to:<28} {kind:<7} {tries:>5} {created:<16} {text}"
