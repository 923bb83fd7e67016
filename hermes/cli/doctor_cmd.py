"""`hermes doctor`: one line per check (config, platform tokens, state.db, ports, dead
letters, cron jobs), a fix for each failure, exit 1 if any failed."""

from __future__ import annotations

import argparse

import trio

from hermes.cli import exit_codes
from hermes.home import HermesHome
from hermes.ops.doctor import CheckResult, diagnose


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    parser.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    """Read-only: a home where serve never ran is checked as it is, nothing is created."""
    results = trio.run(diagnose, HermesHome.from_env())
    for result in results:
        print(line(result))
    return exit_codes.OK if all(r.ok for r in results) else exit_codes.FAILED


def line(result: CheckResult) -> str:
    """`ok    name             detail`, or `FAIL  name  detail -- fix: what to do`; one
    line even when an error message (a job's last error) spans several."""
    text = f"{'ok' if result.ok else 'FAIL':<5} {result.name:<16} {result.detail}"
    if not result.ok and result.fix:
        text += f" -- fix: {result.fix}"
    return " ".join(text.splitlines())
