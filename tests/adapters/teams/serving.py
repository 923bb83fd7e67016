"""`hermes serve` as a real process with its Teams adapter against the fake Teams
(tests/fakes/teams.py): its webhook listener on a free port the fake delivers to, its
token, keys and connector the fake's."""

from __future__ import annotations

import subprocess

from tests.adapters.serving import Serve
from tests.fakes.teams import APP_ID, SECRET

ANN = "29:ann"  # allowlisted, the owner
BOB = "29:bob"  # a second user (allowlisted where a test says)
VARIABLE = "TEAMS_APP_SECRET"


class TeamsServe(Serve):
    """Serve with `platforms.teams` pointed at the fake; `start` points the fake's
    deliveries at the listener's port."""

    name = "teams"
    access = f"    allowed_users: ['{ANN}']\n    owner: '{ANN}'\n"
    secret = SECRET  # the app secret serve is given (another: the fake refuses it)

    def tokens(self) -> dict[str, str]:
        return {VARIABLE: self.secret}

    def settings(self) -> str:
        fake = self.platform
        return (
            f"    app_id: '{APP_ID}'\n    token_env: {VARIABLE}\n"
            f"    base_url: '{fake.service_url}'\n    login_url: '{fake.url}'\n"
            f"    openid_url: '{fake.openid_url}'\n    group_policy: open\n"
        )

    def configure(self, *args, gateway: str = "", **kwargs) -> None:
        super().configure(*args, gateway="  webhooks: {port: 0}\n" + gateway, **kwargs)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = super().start(*args)
        port = int((self.home.root / "webhooks.port").read_text())
        self.platform.configure(webhook_url=self.webhook_url(port))
        return proc

    @staticmethod
    def webhook_url(port: int) -> str:
        return f"http://127.0.0.1:{port}/webhooks/teams"
