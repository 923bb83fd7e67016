"""iMessage's section of config.yaml: the user's BlueBubbles server (required), the secret
its webhook URL carries, the names that address hermes in a group chat, and how often
what the webhook may have missed is fetched."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank, positive


@attrs.frozen
class IMessageConfig(PlatformConfig):
    """iMessage's own settings, beside those every platform has (`base_url`: the BlueBubbles
    server, e.g. `http://192.168.1.20:1234`; `token_env`: the variable holding its server
    password)."""

    webhook_token_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the secret of the webhook URL registered in BlueBubbles
    (`.../webhooks/imessage?token=<secret>`); a delivery without it is refused (required)."""
    names: tuple[str, ...] = ("hermes",)
    """Names that address hermes in a group chat (iMessage has no mentions): a message
    naming one, as a word, is for it."""
    catch_up_every: float = attrs.field(default=60.0, validator=positive)
    """Seconds between the server's message queries that fetch what a failed webhook
    delivery missed (BlueBubbles does not deliver one again); also at every start."""

    def token_names(self) -> list[str]:
        return [n for n in (self.token_env, self.webhook_token_env) if n]
