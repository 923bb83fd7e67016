"""Entry point of the `hermes` command: parse, dispatch, map errors to exit statuses.

Each command's module is imported only when that command runs: `hermes --help` lists the
table below, and `hermes cron list` loads cron's module and what it uses, not serve's
tree or every platform.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hermes.cli import exit_codes

COMMANDS: tuple[tuple[str, str, str], ...] = (  # name, "module:register", what it does
    ("setup", "setup_cmd:register", "set up the model and chat platforms, then try them"),
    ("serve", "serve_cmd:register", "run the gateway until SIGTERM/SIGINT"),
    ("chat", "chat_cmd:register", "talk to the agent through a running serve"),
    ("status", "chat_cmd:register_status", "the running serve's actor tree"),
    ("config", "config_cmd:register", "show the effective configuration"),
    ("sessions", "sessions_cmd:register", "list, show, search and export conversations"),
    ("db", "db_cmd:register", "maintain state.db (safe while serve runs)"),
    ("cron", "cron_cmd:register", "scheduled jobs"),
    ("pairing", "pairing_cmd:register", "approve users who asked to talk to the agent"),
    ("identities", "identities_cmd:register", "accounts linked as one person (/link)"),
    ("approvals", "approvals_cmd:register", "commands that wait for an owner's approval"),
    ("channels", "channels_cmd:register", "home channels (set with /sethome or in config)"),
    ("outbox", "outbox_cmd:register", "messages waiting to be sent, and dead letters"),
    ("skills", "skills_cmd:register", "skills: install, list, show, enable, disable, remove"),
    (
        "doctor",
        "doctor_cmd:register",
        "check config, platform tokens, state.db, ports, dead letters, cron",
    ),
    ("service", "service_cmd:register", "install or remove the systemd unit for hermes serve"),
)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """Every command listed; the one `argv` names given its arguments (its module
    imported now)."""
    parser = argparse.ArgumentParser(prog="hermes", description="a long-lived AI-agent gateway")
    parser.add_argument("--version", action=_Version, nargs=0, help="show hermes's version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((word for word in argv if not word.startswith("-")), None)
    for name, where, what in COMMANDS:
        command = sub.add_parser(name, help=what, description=what)
        if name == chosen:
            module, register = where.split(":")
            getattr(importlib.import_module(f"hermes.cli.{module}"), register)(command)
    return parser


class _Version(argparse.Action):
    """--version, which reads the installed version only when asked (it costs 30 ms)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import importlib.metadata

        print(f"hermes {importlib.metadata.version('hermes')}")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(words).parse_args(words)
    try:
        return args.func(args)
    except Exception as exc:
        status = _status_of(exc)
        if status is None:
            raise
        print(f"hermes: {exc}", file=sys.stderr)
        return status


def _status_of(exc: Exception) -> int | None:
    """The exit status of an error hermes raised and explained, or None for a bug (whose
    traceback is shown). Imported here: `hermes --help` loads neither."""
    from hermes.actors.errors import HermesError
    from hermes.config import ConfigError

    if isinstance(exc, ConfigError):
        return exit_codes.USAGE
    if isinstance(exc, HermesError):
        return exit_codes.of_error(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
