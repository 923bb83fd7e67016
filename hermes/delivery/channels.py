"""Home channels: one per platform, where cron briefs and notices go when no chat is named.

Set from a chat with /sethome (by an owner) or in config.yaml (`platforms.<name>.
home_channel`, as `chat[:thread]`); one set by /sethome wins, and is kept in
state.db with who set it and when.
"""

from __future__ import annotations

from collections.abc import Mapping

import apsw
import attrs

from hermes.adapters.contract import Target
from hermes.adapters.settings import PlatformConfig
from hermes.delivery.targets import parse_target

Platforms = Mapping[str, PlatformConfig]
"""The platforms' sections of config.yaml by name, whose `home_channel`s count (cron's
fires hold them as this type: cron reaches the platforms only through delivery)."""


@attrs.frozen
class HomeChannel:
    target: Target
    set_by: str  # "config", or the platform user who sent /sethome
    set_at: float | None


def set_home(conn: apsw.Connection, target: Target, set_by: str, now: float) -> None:
    conn.execute(
        "INSERT INTO home_channels (platform, chat_id, thread_id, scope_id, set_by, set_at)"
        " VALUES (?,?,?,?,?,?) ON CONFLICT (platform) DO UPDATE SET chat_id = excluded.chat_id,"
        " thread_id = excluded.thread_id, scope_id = excluded.scope_id,"
        " set_by = excluded.set_by, set_at = excluded.set_at",
        (target.platform, target.chat_id, target.thread_id, target.scope_id, set_by, now),
    )


def _configured(platforms: Platforms) -> dict[str, HomeChannel]:
    homes = {}
    for platform, settings in platforms.items():
        target = parse_target(f"{platform}:{settings.home_channel or ''}")
        if target is not None:
            homes[platform] = HomeChannel(target, "config", None)
    return homes


def home_channels(conn: apsw.Connection | None, platforms: Platforms) -> dict[str, HomeChannel]:
    """Every platform's home channel by platform name: state.db's, else config's (`conn`
    None: a state.db without the table yet)."""
    homes = _configured(platforms)
    rows = (
        conn.execute(
            "SELECT platform, chat_id, thread_id, scope_id, set_by, set_at FROM home_channels"
        )
        if conn is not None
        else []
    )
    for platform, chat, thread, scope, by, at in rows:
        homes[platform] = HomeChannel(Target(platform, chat, thread, scope), by, at)
    return dict(sorted(homes.items()))
