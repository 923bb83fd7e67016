"""`hermes config show | path | reference`: the effective config (secrets never shown),
where it is read from, and what every key means."""

from __future__ import annotations

import argparse

import yaml

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.config_reference import reference
from hermes.config import Secrets, dump_config, load_config
from hermes.gateway.settings import Config
from hermes.home import HermesHome


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("show", help="the effective config; secrets shown only as set or missing")
    actions.add_parser("path", help="where config.yaml is read from")
    actions.add_parser(
        "reference", help="every key of config.yaml as Markdown (docs/configuration.md)"
    )
    parser.set_defaults(func=config)


def config(args: argparse.Namespace) -> int:
    if args.action == "reference":
        print(reference(), end="")
        return exit_codes.OK
    home = HermesHome.from_env()
    if args.action == "path":
        print(home.config_path)
        return exit_codes.OK
    effective = load_config(home.config_path, Config, SECTIONS)
    secrets = Secrets.load(home.env_path)
    source = "file" if home.config_path.exists() else "embedded default"
    print(f"# {home.config_path} ({source})")
    print(yaml.safe_dump(dump_config(effective), sort_keys=False), end="")
    names = effective.secret_names()
    if names:
        print("secrets:")
        for name in names:
            print(f"  {name}: {secrets.source(name)}")
    return exit_codes.OK
