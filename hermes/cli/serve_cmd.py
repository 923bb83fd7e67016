"""`hermes serve`: run the gateway in the foreground."""

from __future__ import annotations

import argparse
import sys

from hermes.actors.errors import PortInUse
from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.logs import setup_logging
from hermes.config import load_config
from hermes.gateway.pidfile import AlreadyRunning
from hermes.gateway.serve import (
    READY_LINE,
    StateDbUnusable,
    beside_another,
    run_serve,
)
from hermes.gateway.settings import Config
from hermes.home import HermesHome


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "--no-lock",
        action="store_true",
        help="run even if another serve holds this home (cron stays exactly-once)",
    )
    parser.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)  # a bad config creates nothing
    home.ensure()
    setup_logging(home, args.verbose)
    if args.no_lock:
        config = beside_another(config)

    def ready(port: int) -> None:
        print(f"{READY_LINE} port={port}", flush=True)

    try:
        ops = None
        if config.ops.enabled:
            from hermes.ops.server import ops_children  # the dashboard's stack, when it runs

            ops = ops_children(home, config)
        run_serve(home, config, ready, lock=not args.no_lock, surfaces=ops)
    except (AlreadyRunning, PortInUse) as exc:
        print(f"hermes serve: {exc}", file=sys.stderr)
        return exit_codes.BUSY
    except StateDbUnusable as exc:
        print(f"hermes serve: {exc}", file=sys.stderr)
        return exit_codes.FAILED
    return exit_codes.OK
