"""Matrix as hermes knows it: an event is at most 64 KiB, so a message carries 6000
characters (its HTML beside it and encrypted, in any script); edits are `m.replace`; the
homeserver drops a send whose transaction id it has seen (a send that may have arrived
goes again safely); a pace under Synapse's for a bot that is exempt from the default
(0.2 messages a second), whose 429s say how long to wait; files up to Synapse's default
upload limit."""

from hermes.adapters.matrix.config import MatrixConfig
from hermes.adapters.platform import Limit, Pace, Platform

MATRIX = Platform(
    "matrix",
    Limit(6000, "chars"),
    "hermes.adapters.matrix.adapter:MatrixAdapter",
    pace=Pace(10.0, 2.0, burst=10, chat_burst=5, edits_per_second=2.0),
    deduplicates=True,
    secret_variables=("MATRIX_*",),
    token_hint="the bot account's access token (or its password, in password_env)",
    settings=MatrixConfig,
    edits=True,
    # Synapse's default max_upload_size, 50M (MiB); a homeserver set lower answers 413
    # M_TOO_LARGE, a dead letter.
    max_upload=50 * 1024 * 1024,
    asks=("base_url", "user_id", "token_env"),
)
