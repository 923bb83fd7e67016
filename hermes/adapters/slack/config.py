"""Slack's section of config.yaml: a second token (the app's, for Socket Mode) and how
long its socket may be silent."""

import attrs

from hermes.config import PlatformConfig, positive


@attrs.frozen
class SlackConfig(PlatformConfig):
    """`app_token_env`: the variable holding the app-level token (xapp-...) Socket Mode
    opens its sockets with; `idle_timeout`: how long a socket may go without a frame or
    a pong before it is replaced."""

    app_token_env: str | None = None
    idle_timeout: float = attrs.field(default=30.0, validator=positive)

    def token_names(self) -> list[str]:
        return [n for n in (self.token_env, self.app_token_env) if n]
