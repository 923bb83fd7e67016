"""`hermes serve` as a real process with its iMessage adapter against the fake BlueBubbles
(tests/fakes/bluebubbles.py): its webhook listener on a free port the fake delivers to,
with the webhook's token in the URL, as the user registers it in BlueBubbles."""

from __future__ import annotations

import subprocess

from tests.adapters.serving import Serve
from tests.fakes.bluebubbles import ANN, PASSWORD

PASSWORD_VAR = "BLUEBUBBLES_PASSWORD"
WEBHOOK_VAR = "IMESSAGE_WEBHOOK_TOKEN"
WEBHOOK_TOKEN = "imessage-webhook-token-0001"


class IMessageServe(Serve):
    """Serve with `platforms.imessage` pointed at the fake (a catch-up every second); `start`
    points the fake's webhook at the listener's port."""

    name = "imessage"
    access = f"    allowed_users: ['{ANN}']\n    owner: '{ANN}'\n    group_policy: open\n"

    def tokens(self) -> dict[str, str]:
        return {PASSWORD_VAR: PASSWORD, WEBHOOK_VAR: WEBHOOK_TOKEN}

    def settings(self) -> str:
        return (f"    token_env: {PASSWORD_VAR}\n    webhook_token_env: {WEBHOOK_VAR}\n"
                f"    base_url: '{self.platform.url}'\n    catch_up_every: 1\n")  # fmt: skip

    def configure(self, *args, gateway: str = "", **kwargs) -> None:
        super().configure(*args, gateway="  webhooks: {port: 0}\n" + gateway, **kwargs)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = super().start(*args)
        port = int((self.home.root / "webhooks.port").read_text())
        self.platform.configure(webhook_url=self.webhook_url(port))
        return proc

    @staticmethod
    def webhook_url(port: int) -> str:
        return f"http://127.0.0.1:{port}/webhooks/imessage?token={WEBHOOK_TOKEN}"
