"""`platforms:` in config.yaml as a user meets it: tokens checked before anything starts,
secrets shown only as set or missing."""

from __future__ import annotations

from tests.processes import hermes

TOKEN_VAR = "TEST_BOT_TOKEN"


def test_a_missing_token_variable_stops_serve_naming_it(home, monkeypatch):
    monkeypatch.delenv(TOKEN_VAR, raising=False)
    home.config_path.write_text(
        "gateway:\n  local:\n    port: 0\nops:\n  port: 0\n"
        f"platforms:\n  telegram:\n    token_env: {TOKEN_VAR}\n    base_url: http://x\n"
    )
    done = hermes("serve")
    assert done.returncode == 2, done.stderr
    assert f"the token variable {TOKEN_VAR} is not set" in done.stderr
    assert not home.state_db.exists()  # nothing started

    shown = hermes("config", "show")
    assert shown.returncode == 0
    assert f"{TOKEN_VAR}: missing" in shown.stdout
    monkeypatch.setenv(TOKEN_VAR, "s3cr3t-value")
    shown = hermes("config", "show")
    assert f"{TOKEN_VAR}: environment" in shown.stdout and "s3cr3t-value" not in shown.stdout


def test_a_platform_hermes_has_no_adapter_for_is_refused_at_start(home):
    home.config_path.write_text("platforms:\n  smoke_signals:\n    token_env: TG\n")
    done = hermes("serve")
    assert done.returncode == 2
    assert "platforms.smoke_signals: hermes has no adapter for 'smoke_signals'" in done.stderr


def test_platform_settings_are_checked_like_the_rest_of_config(home):
    home.config_path.write_text("platforms:\n  telegram:\n    group_policy: everyone\n")
    done = hermes("config", "show")
    assert done.returncode == 2
    assert "platforms['telegram'].group_policy: must be one of" in done.stderr


def test_a_platform_needs_a_secret_variable_named_unless_it_takes_none(home, monkeypatch):
    monkeypatch.delenv("MATRIX_PASSWORD", raising=False)
    home.config_path.write_text("platforms:\n  telegram:\n    base_url: http://x\n")
    done = hermes("serve")
    assert done.returncode == 2
    assert "platforms.telegram.token_env: name the variable holding its token" in done.stderr
    home.config_path.write_text(  # a password instead of a token: named, so checked
        "platforms:\n  matrix:\n    base_url: http://x\n    user_id: '@h:x'\n"
        "    password_env: MATRIX_PASSWORD\n"
    )
    done = hermes("serve")
    assert done.returncode == 2
    assert "the token variable MATRIX_PASSWORD is not set" in done.stderr
