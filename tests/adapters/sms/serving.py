"""`hermes serve` as a real process with its SMS adapter against the fake Twilio
(tests/fakes/twilio.py): its webhook listener on a free port, reached by the fake as
through the reverse proxy `PUBLIC_URL` names."""

from __future__ import annotations

import subprocess

from tests.adapters.serving import Serve
from tests.fakes.twilio import ACCOUNT_SID, AUTH_TOKEN, NUMBER, PLAIN_URL, PUBLIC_URL

ANN = "+15551230001"  # allowlisted, the owner
VARIABLE = "TWILIO_AUTH_TOKEN"


class SmsServe(Serve):
    """Serve with `platforms.sms` pointed at the fake; `start` points the fake's
    deliveries at the listener's port. `media`: files go out by `media_url`."""

    name = "sms"
    access = f"    allowed_users: ['{ANN}']\n    owner: '{ANN}'\n"
    media = True

    def tokens(self) -> dict[str, str]:
        return {VARIABLE: AUTH_TOKEN}

    def settings(self) -> str:
        media = f"    media_url: '{PLAIN_URL}/media'\n" if self.media else ""
        return (
            f"    account_sid: '{ACCOUNT_SID}'\n    number: '{NUMBER}'\n"
            f"    token_env: {VARIABLE}\n    base_url: '{self.platform.url}'\n"
            f"    public_url: '{PUBLIC_URL}'\n" + media
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
        return f"http://127.0.0.1:{port}/webhooks/sms"
