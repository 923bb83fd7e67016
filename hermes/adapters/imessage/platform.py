"""iMessage as hermes knows it, through the user's BlueBubbles server on their Mac: text as
it is (iMessage renders no Markdown), long answers split at 10,000 characters (iMessage
takes more, but a bubble that long is unreadable on a phone), and a pace of 10 sends a
second overall, 1 a second per chat (bursts of 3): Messages.app sends through AppleScript
one at a time, and Apple flags an account that sends in bulk. Deliveries come by webhook.
BlueBubbles drops no repeated `tempGuid`, so iMessage does not deduplicate: the adapter
looks a lost text send up by its text before it goes again, and a send started before a
restart is `unknown`."""

from hermes.adapters.imessage.config import IMessageConfig
from hermes.adapters.platform import Limit, Pace, Platform

IMESSAGE = Platform(
    "imessage",
    Limit(10000, "chars"),
    "hermes.adapters.imessage.adapter:IMessageAdapter",
    pace=Pace(10.0, 1.0, burst=10, chat_burst=3),
    secret_variables=("BLUEBUBBLES_*", "IMESSAGE_*"),
    token_hint="the BlueBubbles server's password (BlueBubbles > Settings > Server password)",
    settings=IMessageConfig,
    webhook=True,
    max_upload=100 * 1024 * 1024,  # iMessage's own limit for an attachment
    asks=("base_url", "token_env", "webhook_token_env"),
)
