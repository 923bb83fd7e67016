"""`hermes pairing list | approve PLATFORM CODE | deny PLATFORM USER | revoke PLATFORM USER`.

Written straight into state.db: a running serve reads the approved users
for every message, so an approval or a revocation takes effect at once.
Approval takes the code the user was sent, never a name or id from the list:
a stranger picks their own display name, and a lookalike must not get in.
"""

from __future__ import annotations

import argparse
import sys
import time

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.config import load_config
from hermes.gateway.pairing import (
    CODE_LENGTH,
    PairingRefused,
    attempt_approval,
    deny_request,
    owner_rule,
    pending,
    revoke,
)
from hermes.home import HermesHome
from hermes.state.maintenance import has_table, open_for_writing, open_plain
from hermes.state.schema import immediate

NOTHING_PENDING = "no pending pairing requests"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("pairing", help="approve users who asked to talk to the agent")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="pending pairing requests")
    approve = actions.add_parser("approve", help="let the user who was sent CODE in")
    approve.add_argument("platform", help="telegram, discord, slack, ...")
    approve.add_argument("code", help="the 8-character code the user was sent")
    deny = actions.add_parser("deny", help="drop a pending request; its code stops working")
    deny.add_argument("platform")
    deny.add_argument("user", help="the platform's user id")
    remove = actions.add_parser("revoke", help="remove a user approved by pairing")
    remove.add_argument("platform")
    remove.add_argument("user", help="the platform's user id")
    parser.set_defaults(func=pairing)


def pairing(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    if args.action == "list":
        return _list(home)
    home.ensure()
    conn = open_for_writing(home.state_db)
    try:
        with immediate(conn):
            if args.action == "approve":
                result = attempt_approval(conn, args.platform, args.code, time.time(), "cli")
            elif args.action == "deny":
                result = deny_request(conn, args.platform, args.user)
            else:
                result = revoke(conn, args.platform, args.user)
    finally:
        conn.close()
    if isinstance(result, PairingRefused):
        print(f"hermes: {result}", file=sys.stderr)
        return exit_codes.FAILED
    if args.action == "approve":
        who = f"{result.user_id} ({result.user_name})" if result.user_name else result.user_id
        named = load_config(home.config_path, SECTIONS).platforms.get(result.platform)
        owner = owner_rule(named.owner if named else None, result.user_id, result.owner)
        then = (
            f"they are the owner of {result.platform}"
            if owner
            else "they can talk to the agent now"
        )
        print(f"approved {result.platform} user {who}; {then}")
        return exit_codes.OK
    if args.action == "deny":
        if not result:
            print(f"hermes: no pending request from {args.platform} user {args.user}",
                  file=sys.stderr)  # fmt: skip
            return exit_codes.FAILED
        print(f"denied the pending request of {args.platform} user {args.user}")
        return exit_codes.OK
    if not result:
        print(
            f"hermes: {args.platform} user {args.user} is not approved by pairing"
            " (allowlists in config.yaml are edited there)",
            file=sys.stderr,
        )
        return exit_codes.FAILED
    print(f"revoked {args.platform} user {args.user}; they can no longer talk to the agent")
    return exit_codes.OK


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _list(home: HermesHome) -> int:
    """Read-only: on a home where serve never ran it creates nothing."""
    if not home.state_db.exists():
        print(NOTHING_PENDING)
        return exit_codes.OK
    conn = open_plain(home.state_db)
    try:
        rows = pending(conn, time.time()) if has_table(conn, "pairing_requests") else []
    finally:
        conn.close()
    if not rows:
        print(NOTHING_PENDING)
        return exit_codes.OK
    print(f"{'PLATFORM':<10} {'USER ID':<20} {'NAME':<20} {'AGE':>7}  CODE")
    for r in rows:
        hint = r.code_hint + "*" * (CODE_LENGTH - len(r.code_hint))
        print(f"{r.platform:<10} {r.user_id:<20} {r.user_name or '-':<20} {_age(r.age):>7}  {hint}")
    return exit_codes.OK
