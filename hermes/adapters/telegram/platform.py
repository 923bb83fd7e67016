"""Telegram as hermes knows it: 4096 UTF-16 units a message, MarkdownV2, 30 messages a
second overall and about one a second per chat (the Bot API's FAQ). hermes paces its
sends a little under the overall figure: they are paced as they leave the outbox and
counted by Telegram as they arrive, and a busy machine bunches them on the way."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.telegram.config import TelegramConfig
from hermes.adapters.telegram.markdown import to_markdown_v2

TELEGRAM = Platform(
    "telegram",
    Limit(4096, "utf16"),
    "hermes.adapters.telegram.adapter:TelegramAdapter",
    escape=to_markdown_v2,
    pace=Pace(27.0, 1.0, burst=25),
    secret_variables=("TELEGRAM_*",),
    token_hint="the token @BotFather gave you",
    settings=TelegramConfig,
    edits=True,
    max_upload=50 * 1024 * 1024,  # the Bot API's limit for a bot's uploads
    asks=("token_env",),
)
