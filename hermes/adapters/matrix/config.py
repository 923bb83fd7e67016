"""Matrix's section of config.yaml: the homeserver and the account hermes is, and what
its encrypted rooms need (the key that seals its crypto state, whose devices it trusts)."""

from typing import Literal

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank, positive


@attrs.frozen
class MatrixConfig(PlatformConfig):
    """Matrix's own settings, beside those every platform has (`base_url`: the
    homeserver, `https://matrix.example.org`, required; `token_env`: the variable holding
    the account's access token; `allowed_users`: user ids, `@ann:example.org`)."""

    user_id: str | None = attrs.field(default=None, validator=not_blank)
    """hermes's account, `@hermes:example.org` (required)."""
    password_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the account's password, for a login when `token_env` is
    unset: the token and device it gives are kept in state.db."""
    pickle_key_env: str | None = attrs.field(default=None, validator=not_blank)
    """The variable holding the key that seals the encryption state in state.db
    (required for encrypted rooms)."""
    trust: Literal["tofu", "verified_only"] = "tofu"
    """Whose devices get the room keys: every device of every member, first seen
    trusted (`tofu`), or only devices verified (`verified_only`)."""
    verified_devices: tuple[str, ...] = ()
    """With `trust: verified_only`: the devices' ed25519 keys ("session keys" in
    Element's settings) the operator compared out of band."""
    key_wait: float = attrs.field(default=60.0, validator=positive)
    """Seconds a message whose key has not come waits before hermes tells its sender it
    could not read it (and asks for the key; it is still answered if the key comes)."""
    sync_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds a /sync is held by the homeserver when nothing happens."""
    device_name: str = "hermes"
    """The device's display name at a password login."""

    def login_named(self) -> bool:
        return bool(self.token_env or self.password_env)  # a token, or a password to get one

    def token_names(self) -> list[str]:
        names = (self.token_env, self.password_env, self.pickle_key_env)
        return [n for n in names if n]
