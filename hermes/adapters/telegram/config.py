"""Telegram's section of config.yaml: what every platform has, and its poll's hold."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import positive


@attrs.frozen
class TelegramConfig(PlatformConfig):
    """Telegram's own settings, beside those every platform has."""

    poll_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds each getUpdates poll is held open; a poll not back 10 s after it is a dead
    connection, and is replaced."""
