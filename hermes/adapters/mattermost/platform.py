"""Mattermost as hermes knows it: 16,383 characters a post, Markdown as it is (only the
mentions that notify a whole channel are defused), and the server's default rate limit
of 10 requests a second per user (burst 100), which posts and edits share."""

from hermes.adapters.mattermost.config import MattermostConfig
from hermes.adapters.mattermost.markdown import escape
from hermes.adapters.platform import Limit, Pace, Platform

MATTERMOST = Platform(
    "mattermost",
    Limit(16383, "chars"),
    "hermes.adapters.mattermost.adapter:MattermostAdapter",
    escape=escape,
    pace=Pace(8.0, burst=20, edits_per_second=2.0, edit_burst=5),
    secret_variables=("MATTERMOST_*",),
    token_hint="the bot account's access token (System Console > Bot Accounts)",
    settings=MattermostConfig,
    edits=True,
    webhook=True,
    max_upload=100 * 1024 * 1024,  # FileSettings.MaxFileSize's default
    asks=("base_url", "token_env"),
)
