"""`hermes doctor` on iMessage: the server password shown to the (fake) BlueBubbles's
`GET /api/v1/server/info` with the adapter's own code; once through the CLI as an
operator runs it, and a refused password through the same check in this process."""

from __future__ import annotations

from pathlib import Path

from hermes.adapters.imessage.config import IMessageConfig
from hermes.config import Secrets
from hermes.ops.doctor import check_platform
from tests.adapters.imessage.serving import PASSWORD_VAR, WEBHOOK_VAR
from tests.fakes.bluebubbles import PASSWORD, FakeBlueBubbles
from tests.processes import hermes


def test_doctor_names_the_server_that_takes_the_password_and_its_private_api(home):
    with FakeBlueBubbles(private_api=True) as bb:
        home.config_path.write_text(
            "gateway:\n  local:\n    port: 0\nops:\n  enabled: false\n"
            f"platforms:\n  imessage:\n    token_env: {PASSWORD_VAR}\n"
            f"    webhook_token_env: {WEBHOOK_VAR}\n    base_url: '{bb.url}'\n"
        )
        home.env_path.write_text(f"{PASSWORD_VAR}={PASSWORD}\n{WEBHOOK_VAR}=w\n")
        done = hermes("doctor", timeout=30)
    [line] = [line for line in done.stdout.splitlines() if "imessage token" in line]
    assert line.startswith("ok") and f"BlueBubbles 1.9.9 at {bb.url} (private API on)" in line
    assert bb.refused == [] and PASSWORD not in done.stdout + done.stderr


async def test_a_refused_password_is_a_fail_with_the_servers_reason_and_the_fix():
    wrong = "not-the-password"
    with FakeBlueBubbles() as bb:
        settings = IMessageConfig(token_env=PASSWORD_VAR, base_url=bb.url)
        secrets = Secrets({PASSWORD_VAR: wrong}, frozenset())
        result = await check_platform("imessage", settings, secrets, Path("/h/.env"))
    assert not result.ok and "refused the token" in result.detail
    assert "Unauthorized" in result.detail and result.fix.startswith(f"set {PASSWORD_VAR} in")
    assert [r["route"] for r in bb.refused] == ["auth"]
    assert wrong not in f"{result.detail} {result.fix}"
