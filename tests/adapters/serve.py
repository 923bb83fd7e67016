"""`hermes serve` with the test platform's adapter among its platforms, as a real
process: `python -m tests.adapters.serve [serve options]`."""

from __future__ import annotations

import sys

from hermes.cli.main import build_parser
from hermes.cli.serve_cmd import serve
from tests.adapters.testplatform import FakePlatformAdapter

if __name__ == "__main__":
    args = build_parser().parse_args(["serve", *sys.argv[1:]])
    sys.exit(serve(args, platforms={"testplatform": FakePlatformAdapter}))
