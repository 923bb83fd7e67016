"""`hermes pairing list | approve PLATFORM CODE [--owner] | deny PLATFORM USER | revoke ...`.

Through the operator actions (hermes.operations.pairing). Serve reads the
approved users for every message, so an approval or a revocation takes effect
at the next message. Approval takes the code the user was sent, never a name
or id from the list: a stranger picks their own display name. It makes an owner
only with `--owner`, refused (exit status 2) while config.yaml names owners.
"""

from __future__ import annotations

import argparse

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import NoArgs
from hermes.operations.pairing import ApproveArgs, ApprovedUser, Done, PairingList, UserArgs
from hermes.state.pairing import CODE_LENGTH

NOTHING_PENDING = "no pending pairing requests"


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="pending pairing requests")
    approve = actions.add_parser("approve", help="let the user who was sent CODE in")
    approve.add_argument("platform", help="telegram, discord, slack, ...")
    approve.add_argument("code", help="the 8-character code the user was sent")
    approve.add_argument(
        "--owner",
        action="store_true",
        help="make them an owner of PLATFORM (refused while config.yaml names owners)",
    )
    deny = actions.add_parser("deny", help="drop a pending request; its code stops working")
    deny.add_argument("platform")
    deny.add_argument("user", help="the platform's user id")
    remove = actions.add_parser("revoke", help="remove a user approved by pairing")
    remove.add_argument("platform")
    remove.add_argument("user", help="the platform's user id")
    parser.set_defaults(func=pairing)


def pairing(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    if args.action == "list":
        if not home.state_db.exists():  # a read creates nothing
            print(NOTHING_PENDING)
            return exit_codes.OK
        return _list(perform(home, config, "pairing.list", NoArgs()))
    if args.action == "approve":
        approved: ApprovedUser = perform(
            home, config, "pairing.approve", ApproveArgs(args.platform, args.code, args.owner)
        )
        who = approved.user_id + (f" ({approved.user_name})" if approved.user_name else "")
        then = (
            f"they are an owner of {approved.platform}"
            if approved.owner
            else "they can talk to the agent now"
        )
        print(f"approved {approved.platform} user {who}; {then}")
        return exit_codes.OK
    done: Done = perform(home, config, f"pairing.{args.action}", UserArgs(args.platform, args.user))
    if args.action == "deny":
        print(f"denied the pending request of {done.platform} user {done.user}")
    else:
        print(f"revoked {done.platform} user {done.user}; they can no longer talk to the agent")
    return exit_codes.OK


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _list(found: PairingList) -> int:
    if not found.pending:
        print(NOTHING_PENDING)
        return exit_codes.OK
    print(f"{'PLATFORM':<10} {'USER ID':<20} {'NAME':<20} {'AGE':>7}  CODE")
    for r in found.pending:
        hint = r.code_hint + "*" * (CODE_LENGTH - len(r.code_hint))
        print(f"{r.platform:<10} {r.user_id:<20} {r.user_name or '-':<20} {_age(r.age):>7}  {hint}")
    return exit_codes.OK
