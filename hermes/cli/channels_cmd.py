"""`hermes channels`: each platform's home channel, where briefs and notices go."""

from __future__ import annotations

import argparse
from datetime import datetime

from hermes.adapters.registry import SECTIONS
from hermes.cli import exit_codes
from hermes.cli.act import perform
from hermes.config import load_config
from hermes.delivery.channels import HomeChannel, home_channels
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from hermes.operations.context import NoArgs


def register(parser: argparse.ArgumentParser) -> None:
    """Its arguments, on the parser hermes.cli.main made for it."""
    parser.set_defaults(func=channels)


def channels(args: argparse.Namespace) -> int:
    home = HermesHome.from_env()
    config = load_config(home.config_path, Config, SECTIONS)
    homes: dict[str, HomeChannel] = {}
    if home.state_db.exists():  # a read creates nothing: only config.yaml's then
        homes = perform(home, config, "channels", NoArgs())
    else:
        homes = home_channels(None, config.platforms)
    if not homes:
        print("no home channels: send /sethome in a chat as its owner, or set")
        print("platforms.<name>.home_channel in config.yaml")
        return exit_codes.OK
    print(f"{'PLATFORM':<12} {'CHAT':<24} {'THREAD':<12} {'SET BY':<16} WHEN")
    for platform, h in homes.items():
        when = datetime.fromtimestamp(h.set_at).strftime("%Y-%m-%d %H:%M") if h.set_at else "-"
        print(
            f"{platform:<12} {h.target.chat_id:<24} {h.target.thread_id or '-':<12} "
            f"{h.set_by:<16} {when}"
        )
    return exit_codes.OK
