"""`hermes serve` as a real process with its Telegram adapter (built in) against the fake
Bot API (tests/fakes/telegram.py) and the fake model."""

from __future__ import annotations

from tests.adapters.serving import Serve

TOKEN_VAR = "TELEGRAM_BOT_TOKEN"
TOKEN = "123456:TEST-token"
ANN = 1001  # the fake's default user: allowlisted, the owner


class TelegramServe(Serve):
    """Serve with `platforms.telegram` pointed at the fake (polls held 1 s)."""

    name = "telegram"
    access = f"    allowed_users: ['{ANN}']\n    owner: '{ANN}'\n"

    def tokens(self) -> dict[str, str]:
        return {TOKEN_VAR: TOKEN}

    def settings(self) -> str:
        return (f"    token_env: {TOKEN_VAR}\n    base_url: '{self.platform.url}'\n"
                "    poll_timeout: 1\n")  # fmt: skip
