"""Slack as hermes knows it: 40,000 characters a message (kept under, escaped mrkdwn),
about one message a second per channel, bursts tolerated; chat.update is a Tier 3
method, about 50 calls a minute."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.slack.config import SlackConfig
from hermes.adapters.slack.mrkdwn import escape

SLACK = Platform(
    "slack",
    Limit(39000, "chars"),
    "hermes.adapters.slack.adapter:SlackAdapter",
    escape=escape,
    pace=Pace(50.0, 1.0, burst=50, edits_per_second=50 / 60, edit_burst=5),
    secret_variables=("SLACK_*",),
    token_hint="the app's Bot User OAuth Token (xoxb-...)",
    settings=SlackConfig,
    edits=True,
    max_upload=1024 * 1024 * 1024,  # Slack's limit for one file
    asks=("token_env", "app_token_env"),
)
