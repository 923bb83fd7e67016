"""`hermes identities list | unlink PLATFORM USER`: accounts linked as one person.

Through the operator actions (hermes.operations.identities). Accounts are linked
only from the chats (`/link`), where their owner proves both are theirs; the
operator lists the links and can undo one. Serve reads the links for every
message, so an unlink takes effect at the next message.
"""

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
from hermes.operations.identities import AccountArgs, Unlinked
from hermes.state.identities import Identity

NOTHING_LINKED = "no linked accounts (/link in a chat links an account with another)"


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every linked account, by person")
    remove = actions.add_parser("unlink", help="take an account out of its person")
    remove.add_argument("platform", help="telegram, discord, slack, ...")
    remove.add_argument("user", help="the platform's user id")
    parser.set_defaults(func=identities)


def identities(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    if args.action == "list":
        if not home.state_db.exists():  # a read creates nothing
            print(NOTHING_LINKED)
            return exit_codes.OK
        return _list(perform(home, config, "identities.list", NoArgs()))
    done: Unlinked = perform(
        home, config, "identities.unlink", AccountArgs(args.platform, args.user)
    )
    print(f"unlinked {done.platform} user {done.user}; it is an account of its own again")
    return exit_codes.OK


def _list(found: list[Identity]) -> int:
    if not found:
        print(NOTHING_LINKED)
        return exit_codes.OK
    print(f"{'PERSON':<16} {'PLATFORM':<10} {'USER ID':<24} LINKED AT")
    for i in found:
        when = datetime.fromtimestamp(i.linked_at).strftime("%Y-%m-%d %H:%M")
        print(f"{i.person:<16} {i.platform:<10} {i.user_id:<24} {when}")
    return exit_codes.OK
