"""`hermes doctor` on SMS: the credentials shown to the (fake) Twilio's account resource
with the adapter's own code; once through the CLI as an operator runs it (with an API
key), and a refused auth token through the same check in this process."""

from __future__ import annotations

from pathlib import Path

from hermes.adapters.sms.config import SmsConfig
from hermes.config import Secrets
from hermes.ops.doctor import check_platform
from tests.adapters.sms.serving import VARIABLE
from tests.fakes.twilio import (
    ACCOUNT_SID,
    API_KEY_SECRET,
    API_KEY_SID,
    AUTH_TOKEN,
    NUMBER,
    PUBLIC_URL,
    FakeTwilio,
)
from tests.processes import hermes


def test_doctor_names_the_account_an_api_key_reads(home):
    with FakeTwilio() as twilio:
        home.config_path.write_text(
            "gateway:\n  local:\n    port: 0\n  webhooks:\n    port: 0\nops:\n  enabled: false\n"
            f"platforms:\n  sms:\n    account_sid: '{ACCOUNT_SID}'\n    number: '{NUMBER}'\n"
            f"    token_env: {VARIABLE}\n    base_url: '{twilio.url}'\n"
            f"    public_url: '{PUBLIC_URL}'\n    api_key_sid: '{API_KEY_SID}'\n"
            "    api_key_secret_env: TWILIO_API_KEY_SECRET\n"
        )
        home.env_path.write_text(
            f"{VARIABLE}={AUTH_TOKEN}\nTWILIO_API_KEY_SECRET={API_KEY_SECRET}\n"
        )
        done = hermes("doctor", timeout=30)
    [line] = [line for line in done.stdout.splitlines() if "sms token" in line]
    assert line.startswith("ok") and "hermes test account (active)" in line, done.stdout
    assert twilio.account_reads == 1
    assert AUTH_TOKEN not in done.stdout + done.stderr
    assert API_KEY_SECRET not in done.stdout + done.stderr


async def test_a_refused_token_is_a_fail_with_the_fix():
    revoked = "a-revoked-auth-token"
    with FakeTwilio() as twilio:
        settings = SmsConfig(account_sid=ACCOUNT_SID, number=NUMBER, token_env=VARIABLE,
                             base_url=twilio.url, public_url=PUBLIC_URL)  # fmt: skip
        secrets = Secrets({VARIABLE: revoked}, frozenset())
        result = await check_platform("sms", settings, secrets, Path("/h/.env"))
    assert not result.ok and "refused the token" in result.detail and "401" in result.detail
    assert result.fix.startswith(f"set {VARIABLE} in")
    assert twilio.account_reads == 0
    assert revoked not in f"{result.detail} {result.fix}"
