"""Inbound webhooks as hermes knows them: a way in, not a chat. Services (GitHub, a
monitor, a form) post signed deliveries to the webhook listener; each starts a turn in
its route's conversation, and the answer goes where the route says (a chat of another
platform, a home channel, or nowhere), never back to the sender. What a delivery says
came from outside the owner's hands, whoever the route's role."""

from hermes.adapters.platform import Limit, Platform
from hermes.adapters.webhook.config import WebhookConfig

WEBHOOK = Platform(
    "webhook",
    Limit(4000, "chars"),  # nothing is sent here; a mirror of a route's answer is split so
    "hermes.adapters.webhook.adapter:WebhookAdapter",
    token_hint="each route's secret: the one the sender signs with (GitHub's webhook secret)",
    settings=WebhookConfig,
    webhook=True,
    way_in=True,
    tokens=False,  # no token of its own: each route names its secret (secret_env)
    foreign_text="a webhook's body",  # a commit message, an issue title: anyone's words
)
