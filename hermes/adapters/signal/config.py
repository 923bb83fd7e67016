"""Signal's section of config.yaml: where the user's signal-cli daemon listens and the
account (number) hermes is there. signal-cli holds the account's keys; hermes holds no
secret of Signal's."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank, positive


@attrs.frozen
class SignalConfig(PlatformConfig):
    """Signal's own settings, beside those every platform has (`allowed_users`: phone
    numbers, `+4915...`, or the account ids of users without one)."""

    rpc: str | None = attrs.field(default=None, validator=not_blank)
    """The daemon's JSON-RPC: `http://127.0.0.1:8080` (`signal-cli daemon --http`),
    `tcp://127.0.0.1:7583` (`--tcp`) or `unix:/run/signal-cli/socket` (`--socket`)
    (required)."""
    account: str | None = attrs.field(default=None, validator=not_blank)
    """hermes's Signal account in the daemon, its number (`+4915...`) (required)."""
    keepalive: float = attrs.field(default=15.0, validator=positive)
    """Seconds between the daemon's keep-alives on its event stream (signal-cli's 15);
    three missed make the progress deadline. Over a socket, hermes asks for the daemon's
    version this often instead."""
    max_attachment: int = attrs.field(default=20_000_000, validator=positive)
    """Bytes: an authorized user's attachment larger than this is not read."""
