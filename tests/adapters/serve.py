"""`hermes serve` with the test platform's adapter among its platforms, as a real
process: `python -m tests.adapters.serve [serve options]`. Exit statuses as hermes's."""

from __future__ import annotations

import sys

from hermes.cli import exit_codes
from hermes.cli.main import build_parser
from hermes.cli.serve_cmd import serve
from hermes.config import ConfigError
from tests.adapters.testplatform import FakePlatformAdapter

if __name__ == "__main__":
    args = build_parser().parse_args(["serve", *sys.argv[1:]])
    try:
        sys.exit(serve(args, platforms={"testplatform": FakePlatformAdapter}))
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        sys.exit(exit_codes.USAGE)
