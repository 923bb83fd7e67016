"""`hermes serve` as a real process with its Mattermost adapter against the fake
Mattermost (tests/fakes/mattermost.py), its webhook listener on a free port that the
fake's presses reach as through the reverse proxy the buttons' public URL names."""

from __future__ import annotations

import subprocess

from tests.adapters.serving import Serve
from tests.fakes.mattermost import BOT_TOKEN

TOKEN_VAR = "MATTERMOST_TOKEN"
ACTIONS_URL = "https://hermes.example.org/webhooks/mattermost/actions"


class MattermostServe(Serve):
    """Serve with `platforms.mattermost` pointed at the fake (a socket idle 3 s is dead)."""

    name = "mattermost"
    access = "    allow_all_users: true\n    group_policy: open\n"

    def tokens(self) -> dict[str, str]:
        return {TOKEN_VAR: BOT_TOKEN}

    def settings(self) -> str:
        return (f"    token_env: {TOKEN_VAR}\n    base_url: '{self.platform.url}'\n"
                f"    idle_timeout: 3\n    actions_url: '{ACTIONS_URL}'\n")  # fmt: skip

    def configure(self, *args, gateway: str = "", **kwargs) -> None:
        super().configure(*args, gateway="  webhooks: {port: 0}\n" + gateway, **kwargs)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = super().start(*args)
        port = int((self.home.root / "webhooks.port").read_text())
        self.platform.route_actions(f"http://127.0.0.1:{port}")
        return proc
