"""Slack's section of config.yaml: a second token (the app's, for Socket Mode) and how
long its socket may be silent."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import positive


@attrs.frozen
class SlackConfig(PlatformConfig):
    """Slack's own settings, beside those every platform has."""

    app_token_env: str | None = None
    """The environment variable holding the app-level token (`xapp-...`) Socket Mode
    connects with (required)."""
    idle_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds a socket may go without a frame or a pong before it is replaced."""

    def token_names(self) -> list[str]:
        return [n for n in (self.token_env, self.app_token_env) if n]
