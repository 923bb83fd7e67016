"""WhatsApp's section of config.yaml: the business number, the secrets Meta's webhooks
are proven with, and the template a message outside the 24-hour window goes as."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank


@attrs.frozen
class WhatsAppConfig(PlatformConfig):
    """WhatsApp's own settings, beside those every platform has (`token_env`: the
    system user's access token)."""

    phone_number_id: str | None = attrs.field(default=None, validator=not_blank)
    """The business number's id in the WhatsApp Manager (required; not the number)."""
    app_secret_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the Meta app's secret, which signs every webhook delivery
    (required)."""
    verify_token_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the verify token you type into the webhook's settings
    (required)."""
    template: str | None = attrs.field(default=None, validator=not_blank)
    """An approved message template with one body parameter: a message to a user whose
    last message is older than 24 hours goes as it, with the message's first line as the
    parameter; unset: such a message is not sent (it dies, saying why)."""
    template_language: str = "en_US"
    """The template's language code."""

    def token_names(self) -> list[str]:
        return [n for n in (self.token_env, self.app_secret_env, self.verify_token_env) if n]
