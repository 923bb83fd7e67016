"""Teams's section of config.yaml: the Azure Bot's app id (its secret in `token_env`), the
tenant of a single-tenant bot, and where Microsoft's identity platform and the Bot
Framework's signing keys are (the real ones unless a test says)."""

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank

LOGIN = "https://login.microsoftonline.com"
OPENID = "https://login.botframework.com/v1/.well-known/openidconfiguration"


@attrs.frozen
class TeamsConfig(PlatformConfig):
    """Teams's own settings, beside those every platform has (`token_env`: the variable
    holding the app registration's client secret; `base_url`: the connector hermes writes
    to in a conversation no activity has come from yet, unset: Microsoft's global
    `https://smba.trafficmanager.net/teams/`)."""

    app_id: str | None = attrs.field(default=None, validator=not_blank)
    """The Azure Bot's Microsoft App ID (required): every request Teams sends is for it,
    and hermes logs in as it."""
    tenant_id: str | None = attrs.field(default=None, validator=not_blank)
    """The directory (tenant) id of a single-tenant bot; unset: a multi-tenant one (it logs
    in at botframework.com)."""
    login_url: str = LOGIN
    """Microsoft's identity platform, where hermes fetches its access tokens."""
    openid_url: str = OPENID
    """The Bot Framework's OpenID metadata, naming the keys Teams signs its requests with."""
