"""Email as hermes knows it: one mail per answer (a mail server takes megabytes; no
split), text as it is (a plain part beside a minimal HTML one), a pace well under what
providers allow a mailbox to send, and no deduplication (a resend is another mail,
with the same Message-ID). A file goes as an attachment: 17 MiB at most, which base64
(4 bytes for 3, a CRLF each 76) makes 24.4 MB, under the 25 MB (decimal or binary) a
mail may be at Gmail and by default at Microsoft 365, both counting the encoded mail,
with room left for headers and caption. A server whose own limit is lower refuses it at
MAIL (it is told the size): a dead letter with its words."""

from hermes.adapters.email.config import EmailConfig
from hermes.adapters.platform import Limit, Pace, Platform

EMAIL = Platform(
    "email",
    Limit(1_000_000, "chars"),
    "hermes.adapters.email.adapter:EmailAdapter",
    pace=Pace(2.0, 1.0, burst=5, chat_burst=3),
    secret_variables=("EMAIL_*",),
    token_hint="the mailbox's password (an app password where the provider has them)",
    settings=EmailConfig,
    max_upload=17 * 1024 * 1024,
    foreign_text="an email's body",  # quotes the thread, forwards, anyone's words
    asks=("address", "imap_host", "smtp_host", "token_env"),
)
