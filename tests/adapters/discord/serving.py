"""`hermes serve` as a real process with its Discord adapter (built in) against the fake
Discord (tests/fakes/discord.py) and the fake model."""

from __future__ import annotations

from tests.adapters.serving import Serve
from tests.fakes.discord import TOKEN

TOKEN_VAR = "DISCORD_BOT_TOKEN"


class DiscordServe(Serve):
    """Serve with `platforms.discord` pointed at the fake."""

    name = "discord"
    access = "    allow_all_users: true\n    group_policy: open\n"

    def tokens(self) -> dict[str, str]:
        return {TOKEN_VAR: TOKEN}

    def settings(self) -> str:
        return f"    token_env: {TOKEN_VAR}\n    base_url: '{self.platform.url}'\n"
