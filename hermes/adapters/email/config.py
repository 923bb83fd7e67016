"""Email's section of config.yaml: the mailbox (IMAP in, SMTP out), the folders, and whose
word hermes takes for who sent a mail."""

from typing import Literal

import attrs

from hermes.adapters.settings import PlatformConfig
from hermes.config import not_blank, positive

Security = Literal["tls", "starttls", "plain"]


@attrs.frozen
class EmailConfig(PlatformConfig):
    """Email's own settings, beside those every platform has (`token_env`: the variable
    holding the mailbox's password, an app password where the provider has them;
    `allowed_users`: sender addresses)."""

    address: str | None = attrs.field(default=None, validator=not_blank)
    """The mailbox's address: replies come from it (required)."""
    username: str | None = attrs.field(default=None, validator=not_blank)
    """The login for IMAP and SMTP; unset: `address`."""
    imap_host: str | None = attrs.field(default=None, validator=not_blank)
    """The IMAP server (required)."""
    imap_port: int = 993
    """Its port (993 with `tls`, 143 with `starttls`)."""
    imap_security: Security = "tls"
    """`tls`, `starttls`, or `plain` (only with `allow_insecure`)."""
    smtp_host: str | None = attrs.field(default=None, validator=not_blank)
    """The SMTP submission server (required)."""
    smtp_port: int = 587
    """Its port (587 with `starttls`, 465 with `tls`)."""
    smtp_security: Security = "starttls"
    """`starttls`, `tls`, or `plain` (only with `allow_insecure`)."""
    allow_insecure: bool = False
    """Allow `plain`: passwords and mail in clear text (a test server on loopback)."""
    folder: str = "INBOX"
    """The folder read (with IDLE)."""
    processed_folder: str | None = attrs.field(default=None, validator=not_blank)
    """Where a mail goes once admitted; unset: it stays, flagged \\Seen."""
    trusted_authserv_id: str | None = attrs.field(default=None, validator=not_blank)
    """Your receiving server's name in the `Authentication-Results` headers it adds
    (Gmail's is `mx.google.com`; for any provider, read it from a received mail's raw
    headers): a sender is believed only when it vouches for them (DMARC, or DKIM aligned
    with the From domain)."""
    require_authentication: bool = True
    """`false`: believe the From header without the server's word (a private server only;
    serve warns at start)."""
    message_id_domain: str | None = attrs.field(default=None, validator=not_blank)
    """The domain of the Message-IDs hermes makes; unset: the address's."""
    sessions: Literal["thread", "sender"] = "thread"
    """A conversation per thread (a new subject is a new one), or one per sender."""
    idle_seconds: float = attrs.field(default=1500.0, validator=positive)
    """Seconds between two searches of the folder when IDLE announced nothing (a mail
    the server never announced is still read within this)."""
    liveness_seconds: float = attrs.field(default=30.0, validator=positive)
    """Seconds between two NOOPs that show the IMAP connection answers; one unanswered
    for three times this is replaced."""
    max_attachment: int = attrs.field(default=20 * 1024 * 1024, validator=positive)
    """Bytes of one attachment saved for the agent (larger ones are named, not saved)."""

    def __attrs_post_init__(self) -> None:
        plain = "plain" in (self.imap_security, self.smtp_security)
        if plain and not self.allow_insecure:
            raise ValueError(
                "imap_security: `plain` sends the password in clear text; set"
                " allow_insecure: true to allow it"
            )
        named = [*self.allowed_users, *([self.owner] if self.owner else [])]
        upper = [a for a in named if a != a.lower()]
        if upper:  # a sender is compared as its lower-cased address
            raise ValueError(f"allowed_users / owner: write addresses in lower case ({upper[0]})")
