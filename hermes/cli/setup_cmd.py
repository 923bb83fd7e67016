"""`hermes setup [platform NAME]`: from install to a working bot in one command.

The model (tried with one real request), each platform picked (its token checked with
the adapter's own check), who may talk; config.yaml written with only what differs
from the defaults (an existing one shown as a diff and kept unless the user agrees),
the secrets in .env (0600). Then the round trip: serve started (a running one
restarted), the owner found by a code they send the bot, a message to the owner on
each platform and their answer waited for, and a table of what worked. Every question
has a flag; `--non-interactive` asks nothing and fails naming a missing flag.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hermes.actors.errors import Invalid
from hermes.adapters.contract import Target
from hermes.adapters.registry import SECTIONS, chat_platforms
from hermes.cli import exit_codes, setup_model, setup_platforms
from hermes.cli.config_file import commented_yaml, diff, minimal, minimal_of
from hermes.cli.env_file import set_values
from hermes.cli.setup_ask import Asker, Cancelled, MissingFlag
from hermes.cli.setup_round_trip import Outcome, discover, greet, table
from hermes.cli.setup_serve import log_path, restart
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome

WAIT = 600.0  # seconds the wizard waits for a message of the user's, by default


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    parser.add_argument(
        "part", nargs="?", choices=["platform"], help="`platform NAME`: add one platform"
    )
    parser.add_argument("name", nargs="?", help="with `platform`: the platform to add")
    parser.add_argument(
        "--non-interactive",
        action="store_true",
        help="ask nothing: every answer comes from a flag, a missing one is an error",
    )
    parser.add_argument(
        "--yes", action="store_true", help="replace an existing config.yaml that differs"
    )
    parser.add_argument(
        "--no-round-trip",
        action="store_true",
        help="write the config and stop: no serve, no message to the owner",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=WAIT,
        metavar="SECONDS",
        help=f"how long to wait for each of your messages (default {WAIT:g})",
    )
    parser.add_argument(
        "--service",
        action=argparse.BooleanOptionalAction,
        help="install the systemd user unit at the end (asked when interactive)",
    )
    setup_model.register(parser)
    setup_platforms.register(parser)
    parser.set_defaults(func=setup)


def setup(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    if not args.non_interactive and not sys.stdin.isatty():
        raise Invalid(
            "no terminal to ask in: run `hermes setup` in one, or give --non-interactive"
            " and the flags (`hermes setup --help` lists them)"
        )
    asker = Asker(interactive=not args.non_interactive)
    try:
        return _wizard(home, args, asker)
    except Cancelled as exc:
        print(f"\n{exc}", file=sys.stderr)
        return exit_codes.FAILED
    except KeyboardInterrupt:  # Ctrl-C at a wait: what was written stays, serve runs on
        print("\nhermes setup stopped (Ctrl-C); `hermes setup` again goes on", file=sys.stderr)
        return exit_codes.FAILED


def _wizard(home: HermesHome, args: argparse.Namespace, asker: Asker) -> int:
    one = args.part == "platform"
    if one and args.name not in setup_platforms.wizard_platforms():
        known = ", ".join(sorted(setup_platforms.wizard_platforms()))
        by_hand = f" ({args.name}'s section is written by hand: docs/platforms/{args.name}.md)"
        raise Invalid(
            f"hermes setup platform NAME: NAME is one of {known}, got {args.name!r}"
            + (by_hand if args.name in chat_platforms() else "")
        )
    existing = home.config_path.read_text() if home.config_path.exists() else None
    data = minimal_of(load_config(home.config_path, Config, SECTIONS))
    env: dict[str, str] = {}
    if not one:
        model, keys = setup_model.ask_model(asker, args, data.get("model", {}))
        env |= keys
        if model is None:
            data.pop("model", None)
        else:
            data["model"] = {**data.get("model", {}), **model}
    names = [args.name] if one else setup_platforms.pick(asker, args)
    advanced = bool(args.advanced)
    if names and args.advanced is None and asker.interactive:
        without = [n for n in names if getattr(args, f"{n}_base_url") is None]
        if without:
            advanced = asker.confirm(
                "Set the platforms' API addresses too (a test server, a proxy)?",
                "--advanced",
                None,
                False,
            )
    platforms = data.setdefault("platforms", {})
    outcomes = []
    for name in names:
        answers = setup_platforms.ask_platform(
            asker, args, name, platforms.get(name, {}), home.env_path, advanced
        )
        platforms[name] = answers.section
        env |= answers.secrets
        if not chat_platforms()[name].way_in:  # a way in has no owner to find nor chat to greet
            outcomes.append(Outcome(name, answers.identity))
    if not platforms:
        data.pop("platforms")
    _access(asker, args, data, outcomes)
    text = commented_yaml(minimal(data, str(home.config_path)))
    if not _agreed(asker, args, existing, text, home):
        print(f"kept {home.config_path} as it is; nothing was written")
        return exit_codes.OK
    home.ensure()
    set_values(home.env_path, env)
    home.config_path.write_text(text)
    print(
        f"wrote {home.config_path}"
        + (f" and {len(env)} secret(s) to {home.env_path}" if env else "")
    )
    status = exit_codes.OK
    if not args.no_round_trip and outcomes:
        status = _round_trip(home, args, asker, data, outcomes)
    _offer_service(asker, args)
    return status


def _access(
    asker: Asker, args: argparse.Namespace, data: dict[str, Any], outcomes: list[Outcome]
) -> None:
    """gateway.owners and allowed_users: the owners named by --owner, who else may talk
    (an owner is let in too); platforms without an owner find theirs by a message."""
    gateway = data.setdefault("gateway", {})
    owners = list(gateway.get("owners", []))
    allowed = list(gateway.get("allowed_users", []))
    for entry in args.owner or []:
        owners.append(entry)
        allowed.append(entry)
    for outcome in outcomes:
        name = outcome.platform
        mine = [e.partition(":")[2] for e in owners if e.startswith(f"{name}:")]
        outcome.owner = mine[0] if mine else None
        if outcome.owner is None and (args.non_interactive or args.no_round_trip):
            raise MissingFlag("--owner", f"you, the owner, on {name}, as {name}:ID")
        others = [e for e in args.allow or [] if e.startswith(f"{name}:")]
        if args.allow is None and asker.interactive:
            typed = asker.text(
                f"Who else may talk to the bot on {name}? (their {name} user ids,"
                " comma-separated; empty: only you)",
                "--allow",
                None,
                "",
            )
            others = [f"{name}:{i.strip()}" for i in typed.split(",") if i.strip()]
        allowed += others
    for entry in args.allow or []:
        if entry.partition(":")[0] not in [o.platform for o in outcomes]:
            allowed.append(entry)
    gateway["owners"] = list(dict.fromkeys(owners))
    gateway["allowed_users"] = list(dict.fromkeys(allowed))


def _agreed(
    asker: Asker, args: argparse.Namespace, existing: str | None, text: str, home: HermesHome
) -> bool:
    """Whether config.yaml may become `text`: there is none, it says the same, or the user
    saw the diff and agreed (--yes)."""
    if existing is None or existing == text:
        return True
    print(f"\n{home.config_path} exists; setup would change it so:\n")
    print(diff(existing, text, str(home.config_path)))
    if args.non_interactive and not args.yes:
        raise MissingFlag("--yes", f"replace {home.config_path} as shown")
    return asker.confirm(
        f"Replace {home.config_path} with this?", "--yes", True if args.yes else None, False
    )


def _round_trip(
    home: HermesHome,
    args: argparse.Namespace,
    asker: Asker,
    data: dict[str, Any],
    outcomes: list[Outcome],
) -> int:
    """Serve started with the config written; owners found; a message to each, answered."""
    print(f"\nstarting hermes serve (its output: {log_path(home)})")
    pid = restart(home)
    print(f"hermes serve runs (pid {pid})")
    found = False
    for outcome in outcomes:
        if outcome.owner is None:
            discover(home, outcome, args.wait, asker.say)
            found = found or outcome.owner is not None
    if found:
        gateway = data["gateway"]
        for outcome in outcomes:
            entry = f"{outcome.platform}:{outcome.owner}"
            if outcome.owner is not None and entry not in gateway["owners"]:
                gateway["owners"].append(entry)
                gateway["allowed_users"].append(entry)
                section = data["platforms"][outcome.platform]
                if outcome.target is not None and not section.get("home_channel"):
                    section["home_channel"] = outcome.target.chat_id
        home.config_path.write_text(commented_yaml(minimal(data, str(home.config_path))))
        print(f"added the owners to {home.config_path}; restarting hermes serve")
        restart(home)
    config = load_config(home.config_path, Config, SECTIONS)
    for outcome in outcomes:
        if outcome.owner is not None and outcome.target is None:
            section = config.platforms[outcome.platform]
            chat = section.home_channel or outcome.owner
            outcome.target = _target(outcome.platform, chat)
    greet(home, config, outcomes, args.wait, asker.say)
    print("\n" + table(outcomes))
    worked = all(o.ok() for o in outcomes)
    print("\nhermes serve keeps running; `hermes status` shows it, `hermes doctor` checks it.")
    return exit_codes.OK if worked else exit_codes.FAILED


def _target(platform: str, chat: str) -> Target:
    """Where a message to the owner goes without a chat of theirs seen: `chat[:thread]`."""
    where, _, thread = chat.partition(":")
    return Target(platform, where, thread or None)


def _offer_service(asker: Asker, args: argparse.Namespace) -> None:
    """`hermes service install --user`, when the user wants it (never asked without a
    terminal: --service says)."""
    if not asker.confirm(
        "Install hermes as a systemd user service, so it starts with your session?",
        "--service",
        args.service,
        False,
    ):
        return
    from hermes.cli.main import main

    if main(["service", "install", "--user"]) != exit_codes.OK:
        print("the service was not installed (above: why); `hermes service install --user`")
