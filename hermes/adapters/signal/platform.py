"""Signal as hermes knows it: through the user's signal-cli daemon; 2000 characters a
message (Signal's long-message threshold: longer goes as an attachment), styles as
text-style ranges, a pace well under what Signal lets an account send before it asks for
a captcha, and no deduplication (a send is a new message each time). Files go up to
MAX_UPLOAD (14 MiB: what signal-cli's JSON parser takes as base64, under Signal's 100)."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.signal.config import SignalConfig

MAX_UPLOAD = 14 * 1024 * 1024
"""The largest file sent (Signal takes 100 MiB): signal-cli reads a request with Jackson,
whose default caps one JSON string at 20,000,000 characters (AsamK/signal-cli#2127; over
a socket such a line is never answered). 14 MiB is 19.6 million characters of base64."""

SIGNAL = Platform(
    "signal",
    Limit(2000, "utf16"),
    "hermes.adapters.signal.adapter:SignalAdapter",
    pace=Pace(5.0, 1.0, burst=5, chat_burst=3, edits_per_second=1.0),
    secret_variables=("SIGNAL_*",),
    token_hint="none: signal-cli holds the account (link it or register it there)",
    settings=SignalConfig,
    tokens=False,
    max_upload=MAX_UPLOAD,
    asks=("rpc", "account"),
)
