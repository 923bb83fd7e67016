"""`hermes doctor` on Mattermost: the bot's token shown to the (fake) server's `GET
/users/me` with the adapter's own code; once through the CLI as an operator runs it,
and a refused token through the same check in this process (a CLI start saved)."""

from __future__ import annotations

from pathlib import Path

from hermes.adapters.mattermost.config import MattermostConfig
from hermes.config import Secrets
from hermes.ops.doctor import check_platform
from tests.adapters.mattermost.serving import TOKEN_VAR
from tests.fakes.mattermost import BOT_ID, BOT_NAME, BOT_TOKEN, FakeMattermost
from tests.processes import hermes


def test_doctor_names_the_bot_whose_token_the_server_accepts(home):
    with FakeMattermost() as mm:
        home.config_path.write_text(
            "gateway:\n  local:\n    port: 0\nops:\n  enabled: false\n"
            f"platforms:\n  mattermost:\n    token_env: {TOKEN_VAR}\n    base_url: '{mm.url}'\n"
        )
        home.env_path.write_text(f"{TOKEN_VAR}={BOT_TOKEN}\n")
        done = hermes("doctor", timeout=30)
    [line] = [line for line in done.stdout.splitlines() if "mattermost token" in line]
    assert line.startswith("ok") and f"@{BOT_NAME} (user {BOT_ID}) on {mm.url}" in line
    assert mm.refused == [] and BOT_TOKEN not in done.stdout + done.stderr


async def test_a_refused_token_is_a_fail_with_the_servers_reason_and_the_fix():
    revoked = "a-revoked-token"
    with FakeMattermost() as mm:
        settings = MattermostConfig(token_env=TOKEN_VAR, base_url=mm.url)
        secrets = Secrets({TOKEN_VAR: revoked}, frozenset())
        result = await check_platform("mattermost", settings, secrets, Path("/h/.env"))
    assert not result.ok and "refused the token" in result.detail
    assert "session_expired" in result.detail and result.fix.startswith(f"set {TOKEN_VAR} in")
    assert [r["route"] for r in mm.refused] == ["me"]
    assert revoked not in f"{result.detail} {result.fix}"
