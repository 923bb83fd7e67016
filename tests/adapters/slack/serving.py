"""`hermes serve` as a real process with its Slack adapter (built in) against the fake
Slack (tests/fakes/slack.py) and the fake model."""

from __future__ import annotations

from tests.adapters.serving import Serve
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN

BOT_VAR, APP_VAR = "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"


class SlackServe(Serve):
    """Serve with `platforms.slack` pointed at the fake (a socket idle 3 s is dead)."""

    name = "slack"
    access = "    allow_all_users: true\n    group_policy: open\n"

    def tokens(self) -> dict[str, str]:
        return {BOT_VAR: BOT_TOKEN, APP_VAR: APP_TOKEN}

    def settings(self) -> str:
        return (f"    token_env: {BOT_VAR}\n    app_token_env: {APP_VAR}\n"
                f"    base_url: '{self.platform.url}'\n    idle_timeout: 3\n")  # fmt: skip
