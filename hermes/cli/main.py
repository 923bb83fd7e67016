"""Entry point of the `hermes` command: parse, dispatch, map errors to exit statuses."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

from hermes.actors.errors import HermesError
from hermes.cli import (
    approvals_cmd,
    channels_cmd,
    chat_cmd,
    config_cmd,
    cron_cmd,
    db_cmd,
    doctor_cmd,
    exit_codes,
    identities_cmd,
    outbox_cmd,
    pairing_cmd,
    serve_cmd,
    service_cmd,
    sessions_cmd,
    skills_cmd,
)
from hermes.config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermes", description="a long-lived AI-agent gateway")
    parser.add_argument(
        "--version", action="version", version=f"hermes {importlib.metadata.version('hermes')}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_cmd.register(sub)
    chat_cmd.register(sub)
    config_cmd.register(sub)
    sessions_cmd.register(sub)
    db_cmd.register(sub)
    cron_cmd.register(sub)
    pairing_cmd.register(sub)
    identities_cmd.register(sub)
    approvals_cmd.register(sub)
    channels_cmd.register(sub)
    outbox_cmd.register(sub)
    skills_cmd.register(sub)
    doctor_cmd.register(sub)
    service_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return exit_codes.of_error(exc)


if __name__ == "__main__":
    sys.exit(main())
