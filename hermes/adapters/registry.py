"""Every platform hermes speaks, by name: adding one is its package and one line here."""

from __future__ import annotations

from hermes.adapters.discord.platform import DISCORD
from hermes.adapters.email.platform import EMAIL
from hermes.adapters.local.platform import LOCAL
from hermes.adapters.matrix.platform import MATRIX
from hermes.adapters.platform import Limit, Platform
from hermes.adapters.signal.platform import SIGNAL
from hermes.adapters.slack.platform import SLACK
from hermes.adapters.telegram.platform import TELEGRAM
from hermes.adapters.whatsapp.platform import WHATSAPP
from hermes.config import PlatformConfig

PLATFORMS: dict[str, Platform] = {
    p.name: p for p in (LOCAL, TELEGRAM, SLACK, DISCORD, WHATSAPP, EMAIL, MATRIX, SIGNAL)
}
SECTIONS: dict[str, type[PlatformConfig]] = {n: p.settings for n, p in PLATFORMS.items()}
DEFAULT_LIMIT = Limit(4000, "chars")  # a platform hermes does not know (a mirror of one)


def chat_platforms() -> dict[str, Platform]:
    """The platforms with an adapter to configure (all but the local endpoint)."""
    return {name: p for name, p in PLATFORMS.items() if p.factory is not None}
