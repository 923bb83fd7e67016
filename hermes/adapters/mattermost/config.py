"""Mattermost's section of config.yaml: the server (required: it is self-hosted), how long
its socket may be silent, and where its buttons post back."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import positive


@attrs.frozen
class MattermostConfig(PlatformConfig):
    """Mattermost's own settings, beside those every platform has."""

    idle_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds its WebSocket may go without a frame or a pong before it is replaced (and
    what was missed meanwhile fetched)."""
    actions_url: str | None = None
    """The public URL, behind your reverse proxy, that Mattermost posts button presses to:
    the webhook listener's `/webhooks/mattermost/actions`. Unset: messages carry no
    buttons, and approvals are answered with /approve or /deny."""
