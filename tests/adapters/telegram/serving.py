"""`hermes serve` as a real process with its Telegram adapter (built in) against the fake
Bot API (tests/fakes/telegram.py) and the fake model."""

from __future__ import annotations

import os
import subprocess

from tests.adapters.serving import Serve
from tests.processes import HERMES

TOKEN_VAR = "TELEGRAM_BOT_TOKEN"
TOKEN = "123456:TEST-token"
ANN = 1001  # the fake's default user: allowlisted


class TelegramServe(Serve):
    """Serve with `platforms.telegram` pointed at the fake (polls held 1 s)."""

    def configure(
        self,
        drain: float = 10,
        resume_window: float = 600,
        platform: str = "",
        top: str = "",
        access: str = f"    allowed_users: ['{ANN}']\n",
    ) -> None:
        """`platform`: more YAML lines under platforms.telegram; `access`: who may talk
        (Ann by default; "" for pairing)."""
        self.home.config_path.write_text(
            f"model: {{provider: fake, model: m, base_url: '{self.model.url}'}}\n"
            f"gateway:\n  drain_timeout: {drain}\n  resume_window: {resume_window}\n"
            "  local:\n    port: 0\n"
            "platforms:\n"
            f"  telegram:\n    token_env: {TOKEN_VAR}\n    base_url: '{self.platform.url}'\n"
            "    poll_timeout: 1\n" + access + platform + top
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [*HERMES, "serve", *args], env={**os.environ, TOKEN_VAR: TOKEN}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.procs.append(proc)
        return proc
