"""Microsoft Teams as hermes knows it (the Bot Framework's connector): about 28 KB of text
a message, Markdown as Teams renders it; per bot and conversation 7 messages a second, 8
in 2 s, 60 in 30 s (kept: 1.9 a second, in bursts of 3) and 50 requests a second for the
app in a tenant; deliveries come by webhook; files only in a personal chat, through the
file consent card."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.teams.config import TeamsConfig
from hermes.adapters.teams.files import MAX_UPLOAD

TEAMS = Platform(
    "teams",
    # Teams refuses a message over its size limit (413 MessageSizeTooBig), counted on the
    # whole activity in UTF-16: documented as 40 KB, later 100 KB (80 KB advised). 14,000
    # code units are 28 KB of text, room left under either for the activity around it.
    Limit(14000, "utf16"),
    "hermes.adapters.teams.adapter:TeamsAdapter",
    pace=Pace(50.0, 1.9, burst=50, chat_burst=3),
    secret_variables=("TEAMS_*",),
    token_hint="the Azure Bot's app id and a client secret of its app registration",
    settings=TeamsConfig,
    edits=True,
    webhook=True,
    max_upload=MAX_UPLOAD,
    asks=("app_id", "token_env"),  # a single-tenant bot adds tenant_id by hand
)
