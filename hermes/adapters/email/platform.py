"""Email as hermes knows it: one mail per answer (a mail server takes megabytes; no
split), text as it is (a plain part beside a minimal HTML one), a pace well under what
providers allow a mailbox to send, and no deduplication (a resend is another mail,
with the same Message-ID)."""

from hermes.adapters.email.adapter import EmailAdapter
from hermes.adapters.email.config import EmailConfig
from hermes.adapters.platform import Limit, Pace, Platform

EMAIL = Platform(
    "email",
    Limit(1_000_000, "chars"),
    EmailAdapter,
    pace=Pace(2.0, 1.0, burst=5, chat_burst=3),
    secret_variables=("EMAIL_*",),
    token_hint="the mailbox's password (an app password where the provider has them)",
    settings=EmailConfig,
)
