"""`hermes doctor` on Mattermost, as an operator runs it: the bot's token shown to the
(fake) server's `GET /users/me`, with the adapter's own code."""

from __future__ import annotations

import pytest

from tests.adapters.mattermost.serving import TOKEN_VAR
from tests.fakes.mattermost import BOT_ID, BOT_NAME, BOT_TOKEN, FakeMattermost
from tests.processes import hermes


@pytest.mark.parametrize("token", [BOT_TOKEN, "a-revoked-token"])
def test_doctor_names_the_bot_or_says_the_token_was_refused(home, token):
    with FakeMattermost() as mm:
        home.config_path.write_text(
            "gateway:\n  local:\n    port: 0\nops:\n  enabled: false\n"
            f"platforms:\n  mattermost:\n    token_env: {TOKEN_VAR}\n    base_url: '{mm.url}'\n"
        )
        home.env_path.write_text(f"{TOKEN_VAR}={token}\n")
        done = hermes("doctor", timeout=30)
    [line] = [line for line in done.stdout.splitlines() if "mattermost token" in line]
    if token == BOT_TOKEN:
        assert line.startswith("ok") and f"@{BOT_NAME} (user {BOT_ID}) on {mm.url}" in line
        assert mm.refused == []
    else:
        assert line.startswith("FAIL") and "refused the token" in line, done.stdout
        assert "session_expired" in line and f"fix: set {TOKEN_VAR} in {home.env_path}" in line
        assert [r["route"] for r in mm.refused] == ["me"]
    assert token not in done.stdout + done.stderr
