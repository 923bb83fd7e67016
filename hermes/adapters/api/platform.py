"""The OpenAI-compatible API as a platform: it answers in the request that asked (the
turn's steps are streamed to it, nothing goes through the outbox), no limit worth
splitting for, no pace."""

from hermes.adapters.api.config import ApiConfig
from hermes.adapters.platform import Limit, Platform

API = Platform(
    "api",
    Limit(1_000_000, "chars"),
    "hermes.adapters.api.adapter:ApiAdapter",
    token_hint="a key you make (`openssl rand -hex 32`) and give the client",
    settings=ApiConfig,
    streams=True,
)
