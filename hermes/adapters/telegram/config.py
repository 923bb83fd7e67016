"""Telegram's section of config.yaml: what every platform has, and its poll's hold."""

import attrs

from hermes.config import PlatformConfig, positive


@attrs.frozen
class TelegramConfig(PlatformConfig):
    """`poll_timeout`: how long each getUpdates is held open (seconds)."""

    poll_timeout: float = attrs.field(default=30.0, validator=positive)
