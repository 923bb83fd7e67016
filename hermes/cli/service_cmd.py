"""`hermes service install [--user] [--print] | uninstall [--user]`: run serve under systemd.

install writes the unit (hermes/ops/systemd.py) and prints the systemctl commands
to run next rather than running them: it stays testable without a systemd, and
enabling a service that starts at boot is a step the operator takes knowingly.
A unit already there with other content (another home, another drain timeout)
is replaced only with --force; an identical one is left as it is.

uninstall refuses while the unit is still enabled, because `systemctl disable`
needs the file to find its links; it prints the command to run first.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.config import load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.ops.systemd import (
    DEFAULT_NAME,
    MARKER,
    UnitError,
    enabled_links,
    home_problem,
    invoking_user,
    render_unit,
    unit_dir,
    unit_name,
    write_unit,
)


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    install = actions.add_parser("install", help="write a systemd unit that runs hermes serve")
    install.add_argument(
        "--print", action="store_true", dest="print_only", help="show the unit, write nothing"
    )
    install.add_argument(
        "--force", action="store_true", help="replace an existing unit with other content"
    )
    remove = actions.add_parser("uninstall", help="remove the unit written by install")
    remove.add_argument(
        "--force", action="store_true", help="remove it even if hermes did not write it"
    )
    for action in (install, remove):
        action.add_argument(
            "--user",
            action="store_true",
            help="a user unit (systemctl --user) instead of a system unit in /etc",
        )
        action.add_argument(
            "--name",
            default=DEFAULT_NAME,
            help=f"unit name, for a second HERMES_HOME on this machine (default {DEFAULT_NAME})",
        )
    parser.set_defaults(func=service)


def service(args: argparse.Namespace) -> int:
    try:
        name = unit_name(args.name)
        if args.action == "install":
            return _install(args, name)
        return _uninstall(args, name)
    except UnitError as exc:
        return _fail(str(exc))


def _fail(message: str) -> int:
    print(f"hermes service: {message}", file=sys.stderr)
    return exit_codes.FAILED


def _systemctl(user: bool) -> str:
    return "systemctl --user" if user else "systemctl"


def _install(args: argparse.Namespace, name: str) -> int:
    home = HermesHome.from_env()
    config = load_config(
        home.config_path, Config, SECTIONS
    )  # a bad config.yaml exits 2 before anything is written
    run_as = None if args.user else invoking_user()
    if run_as is not None:
        problem = home_problem(home.root, run_as)
        if problem:
            return _fail(problem)
    if not sys.executable:
        return _fail("cannot tell which Python runs hermes (sys.executable is empty)")
    text = render_unit(home.root, config.gateway.drain_timeout, sys.executable, run_as)
    if args.print_only:
        print(text, end="")
        return exit_codes.OK
    directory = unit_dir(args.user)
    path = directory / name
    if not args.user:
        if not directory.is_dir():
            return _fail(f"{directory} does not exist: is this a systemd system?")
        if not os.access(directory, os.W_OK):
            return _fail(
                f"cannot write {path}: a system unit needs root (sudo), or use --user, "
                f"or: hermes service install --print | sudo tee {path}"
            )
    existing = _read(path)
    if existing == text:
        print(f"{path} is already installed, unchanged")
    elif existing is not None and not args.force:
        return _fail(
            f"{path} exists with other content; see the new one with --print, "
            "replace it with --force (or pick another --name)"
        )
    else:
        if args.user:
            home.ensure()  # WorkingDirectory must exist; as ourselves we may create it
        try:
            write_unit(path, text)
        except OSError as exc:
            return _fail(f"cannot write {path}: {exc.strerror or exc}")
        print(f"wrote {path}")
    unit = name.removesuffix(".service")
    print("next:")
    print(f"  {_systemctl(args.user)} daemon-reload")
    print(f"  {_systemctl(args.user)} enable --now {unit}")
    if args.user:
        print(f"  loginctl enable-linger {invoking_user()}  # keep it running while logged out")
    return exit_codes.OK


def _uninstall(args: argparse.Namespace, name: str) -> int:
    path = unit_dir(args.user) / name
    unit = name.removesuffix(".service")
    existing = _read(path)
    if existing is None:
        return _fail(f"no unit at {path}; nothing to uninstall")
    if not existing.startswith(MARKER) and not args.force:
        return _fail(f"{path} was not written by hermes service install; --force removes it")
    links = enabled_links(path)
    if links:
        return _fail(
            f"{unit} is still enabled ({', '.join(map(str, links))}); "
            f"run first: {_systemctl(args.user)} disable --now {unit}"
        )
    try:
        path.unlink()
    except OSError as exc:
        return _fail(f"cannot remove {path}: {exc.strerror or exc}")
    print(f"removed {path}")
    print("next:")
    print(f"  {_systemctl(args.user)} stop {unit}  # if it still runs")
    print(f"  {_systemctl(args.user)} daemon-reload")
    return exit_codes.OK


def _read(path: Path) -> str | None:
    """The unit file's text, or None when there is none."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnitError(f"cannot read {path}: {exc.strerror or exc}") from None
