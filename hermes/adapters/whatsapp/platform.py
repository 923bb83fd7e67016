"""WhatsApp (Cloud API) as hermes knows it: 4096 characters a message, text as it is
(WhatsApp reads *bold* and _italic_ itself), 80 messages a second for a number, and
about one every 6 seconds to one user (the pair rate, in bursts of a few); deliveries
come by webhook; files up to 100 MB (a document's limit)."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.whatsapp.config import WhatsAppConfig
from hermes.adapters.whatsapp.files import DOCUMENT_MAX

WHATSAPP = Platform(
    "whatsapp",
    Limit(4096, "chars"),
    "hermes.adapters.whatsapp.adapter:WhatsAppAdapter",
    pace=Pace(80.0, 1 / 6, burst=80, chat_burst=5),
    secret_variables=("WHATSAPP_*",),
    token_hint="a system user's access token from the Meta app (WhatsApp > API Setup)",
    settings=WhatsAppConfig,
    webhook=True,
    # The Cloud API's document limit (100 MB). Images (5 MB) and voice notes (16 MB) go
    # as documents when larger (hermes/adapters/whatsapp/files.py).
    max_upload=DOCUMENT_MAX,
    asks=("phone_number_id", "token_env", "app_secret_env", "verify_token_env"),
)
