"""Discord as hermes knows it: 2000 characters a message, sent as written, 50 requests a
second globally and about one message a second per channel (its rate-limit docs)."""

from hermes.adapters.platform import Limit, Pace, Platform

DISCORD = Platform(
    "discord",
    Limit(2000, "chars"),
    "hermes.adapters.discord.adapter:DiscordAdapter",
    pace=Pace(50.0, 1.0, burst=50),
    secret_variables=("DISCORD_*",),
    token_hint="the bot's token from the Developer Portal (Bot > Reset Token)",
    edits=True,
    max_upload=10 * 1024 * 1024 - 65536,  # 10 MiB a request without boosts, less the form
    asks=("token_env",),
)
