"""`hermes doctor` on Teams, as an operator runs it: the app's secret exchanged for a token
at the (fake) identity platform, with the adapter's own code."""

from __future__ import annotations

import pytest

from tests.adapters.teams.serving import VARIABLE
from tests.fakes.teams import APP_ID, SECRET, FakeTeams
from tests.processes import hermes


@pytest.mark.parametrize("secret", [SECRET, "a-wrong-secret"])
def test_doctor_gets_a_token_for_the_app_or_says_the_secret_was_rejected(home, secret):
    with FakeTeams() as teams:
        home.config_path.write_text(
            "gateway:\n  local:\n    port: 0\n  webhooks:\n    port: 0\nops:\n  enabled: false\n"
            f"platforms:\n  teams:\n    app_id: '{APP_ID}'\n    token_env: {VARIABLE}\n"
            f"    login_url: '{teams.url}'\n    openid_url: '{teams.openid_url}'\n"
        )
        home.env_path.write_text(f"{VARIABLE}={secret}\n")
        done = hermes("doctor", timeout=30)
    [line] = [line for line in done.stdout.splitlines() if "teams token" in line]
    if secret == SECRET:
        assert line.startswith("ok") and f"app {APP_ID}" in line, done.stdout
        assert teams.token_grants == 1
    else:
        assert line.startswith("FAIL") and "rejected" in line and "AADSTS7000215" in line
        assert f"fix: set {VARIABLE} in {home.env_path}" in line
        assert teams.token_grants == 0
    assert secret not in done.stdout + done.stderr
