"""`hermes db check | backup PATH | checkpoint [--truncate] | stats`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hermes.cli import exit_codes
from hermes.home import HermesHome
from hermes.state import maintenance


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("check", help="integrity_check, quick_check, schema version, WAL size")
    backup = actions.add_parser(
        "backup", help="a consistent copy, taken with the online backup API"
    )
    backup.add_argument("path", type=Path)
    checkpoint = actions.add_parser("checkpoint", help="move the WAL into the database file")
    checkpoint.add_argument(
        "--truncate", action="store_true", help="also empty the WAL (waits for readers)"
    )
    actions.add_parser("stats", help="row counts and file sizes")
    parser.set_defaults(func=db)


def db(args: argparse.Namespace) -> int:
    path = HermesHome.from_env().state_db
    if args.action == "check":
        report = maintenance.check(path)
        print(f"integrity_check: {report.integrity}")
        print(f"quick_check: {report.quick}")
        print(f"schema_version: {report.schema_version}")
        if report.schema_error is not None:
            print(f"schema: {report.schema_error}")
        print(f"wal_bytes: {report.wal_bytes}")
        return exit_codes.OK if report.ok else exit_codes.FAILED
    if args.action == "backup":

        def progress(done: int, total: int) -> None:
            print(f"\rbacked up {done}/{total} pages", end="", file=sys.stderr, flush=True)

        pages = maintenance.backup(path, args.path, progress)
        print(file=sys.stderr)
        print(f"backed up {pages} pages of {path} to {args.path}")
        return exit_codes.OK
    if args.action == "checkpoint":
        frames, done = maintenance.checkpoint(path, args.truncate)
        mode = "TRUNCATE" if args.truncate else "PASSIVE"
        print(f"{mode} checkpoint: {done} of {frames} WAL frames written to the database")
        return exit_codes.OK
    return _stats(path)


def _stats(path: Path) -> int:
    """Row counts; a home where serve never ran has none, and nothing is created for it."""
    if not path.exists():
        print(f"no state.db yet at {path}: hermes serve creates it")
        for key in ("sessions", "live_sessions", "messages"):
            print(f"{key}: 0")
        return exit_codes.OK
    for key, value in maintenance.stats(path).items():
        print(f"{key}: {value}")
    return exit_codes.OK
