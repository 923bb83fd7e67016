"""config.yaml loading, its errors, secrets, and the HERMES_HOME layout."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hermes.config import Config, ConfigError, Secrets, load_config
from hermes.home import HermesHome, write_secret_file
from tests.processes import hermes


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_missing_file_is_the_embedded_default(tmp_path):
    assert load_config(tmp_path / "config.yaml") == Config()
    assert Config().gateway.drain_timeout == 30.0
    assert Config().model.provider == "offline"


def test_values_override_defaults(tmp_path):
    path = write(
        tmp_path / "config.yaml",
        "gateway:\n  drain_timeout: 5\n  busy_mode: queue\n"
        "fallback_providers:\n  - {provider: openai, model: gpt, api_key_env: OPENAI_KEY}\n"
        "timezone: Europe/Berlin\n",
    )
    config = load_config(path)
    assert config.gateway.drain_timeout == 5.0
    assert config.gateway.busy_mode == "queue"
    assert config.gateway.group_sessions_per_user is True
    assert config.fallback_providers[0].model == "gpt"
    assert config.secret_names() == ["OPENAI_KEY"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gateway:\n  drain_timout: 5\n", "unknown key drain_timout in gateway"),
        ("nonsense: 1\n", "unknown key nonsense at the top level"),
        ("gateway:\n  drain_timeout: soon\n", "gateway.drain_timeout: expected a number"),
        ("gateway:\n  drain_timeout: -1\n", "gateway.drain_timeout: must be greater than 0"),
        ("gateway:\n  busy_mode: panic\n", "gateway.busy_mode: must be one of"),
        ("gateway:\n  local:\n    port: 70000\n", "gateway.local.port: must be a port number"),
        ("agent:\n  max_turns: '5'\n", "agent.max_turns: expected a whole number, got '5'"),
        ("cron:\n  mirror_delivery: yes please\n", "cron.mirror_delivery: expected true or false"),
        ("fallback_providers:\n  - {url: x}\n", "unknown key url in fallback_providers[0]"),
        ("timezone: Mars/Olympus\n", "timezone: unknown timezone 'Mars/Olympus'"),
        ("gateway: 3\n", "gateway: expected a mapping"),
        ("- a list\n", "the top level must be a mapping"),
        ("gateway:\n  drain_timeout: [\n", "not valid YAML (line 3"),
    ],
)
def test_bad_config_names_the_key_and_the_file(tmp_path, text, message):
    path = write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_secrets_come_from_environment_first_then_dotenv(tmp_path):
    env = write(tmp_path / ".env", "A_KEY=from-file\nB_KEY='quoted value'\n")
    secrets = Secrets.load(env, environ={"A_KEY": "from-env"})
    assert secrets.get("A_KEY") == "from-env"
    assert secrets.get("B_KEY") == "quoted value"
    assert secrets.source("A_KEY") == "environment"
    assert secrets.source("B_KEY") == ".env"
    assert secrets.source("C_KEY") == "missing"
    assert "from-env" not in repr(secrets) and "quoted" not in repr(secrets)


def test_home_layout_is_private(tmp_path):
    home = HermesHome(tmp_path / "h").ensure()
    for directory in (home.root, home.memories, home.scripts, home.cron_output, home.logs):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert stat.S_IMODE((home.root / "cron").stat().st_mode) == 0o700
    write_secret_file(home.serve_token, "t0ken")
    assert stat.S_IMODE(home.serve_token.stat().st_mode) == 0o600
    home.env_path.write_text("X=1\n")
    home.env_path.chmod(0o644)
    home.ensure()
    assert stat.S_IMODE(home.env_path.stat().st_mode) == 0o600


def test_cli_bad_config_is_one_line_and_status_2(home):
    write(home.config_path, "gateway:\n  drain_timeout: 5\n  colour: blue\n")
    for command in (["serve"], ["config", "show"]):
        result = hermes(*command)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "unknown key colour in gateway" in lines[0]
        assert str(home.config_path) in lines[0]
        assert "Traceback" not in result.stderr


def test_cli_config_show_masks_secrets(home, monkeypatch):
    write(home.config_path, "model:\n  provider: openai\n  api_key_env: PROVIDER_KEY\n")
    write_secret_file(home.env_path, "PROVIDER_KEY=sk-very-secret-value\n")
    monkeypatch.delenv("PROVIDER_KEY", raising=False)
    result = hermes("config", "show")
    assert result.returncode == 0, result.stderr
    assert "provider: openai" in result.stdout
    assert "PROVIDER_KEY: .env" in result.stdout
    assert "sk-very-secret-value" not in result.stdout + result.stderr
    assert hermes("config", "path").stdout.strip() == str(home.config_path)


def test_cli_version():
    result = hermes("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("hermes ")
