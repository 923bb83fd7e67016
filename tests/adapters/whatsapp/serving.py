"""`hermes serve` as a real process with its WhatsApp adapter against the fake Cloud API
(tests/fakes/whatsapp.py), its webhook listener on a free port the fake delivers to."""

from __future__ import annotations

import subprocess

from tests.adapters.serving import Serve
from tests.fakes.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN

ANN = "4915112345678"  # allowlisted, the owner
BOB = "4915187654321"  # a second user (allowlisted where a test says)
VARIABLES = {"WHATSAPP_TOKEN": TOKEN, "WHATSAPP_APP_SECRET": APP_SECRET,
             "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN}  # fmt: skip


class WhatsAppServe(Serve):
    """Serve with `platforms.whatsapp` pointed at the fake; `start` points the fake's
    deliveries at the listener's port."""

    name = "whatsapp"
    access = f"    allowed_users: ['{ANN}']\n    owner: '{ANN}'\n"

    wrong_token = False  # start with a token the fake refuses (the adapter stops)

    def tokens(self) -> dict[str, str]:
        return (
            {**VARIABLES, "WHATSAPP_TOKEN": "EAAG-refused"} if self.wrong_token else dict(VARIABLES)
        )

    def settings(self) -> str:
        return (
            "    token_env: WHATSAPP_TOKEN\n    app_secret_env: WHATSAPP_APP_SECRET\n"
            "    verify_token_env: WHATSAPP_VERIFY_TOKEN\n"
            f"    base_url: '{self.platform.graph_url}'\n"
            f"    phone_number_id: '{PHONE_NUMBER_ID}'\n"
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
        return f"http://127.0.0.1:{port}/webhooks/whatsapp"
