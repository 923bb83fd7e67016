"""config.yaml loading, its errors, secrets, and the HERMES_HOME layout."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hermes.config import ConfigError, Secrets, load_config, parse_config
from hermes.gateway.serve import READY_LINE
from hermes.gateway.settings import Config
from hermes.home import HermesHome, write_secret_file
from tests.processes import hermes


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_missing_file_is_the_embedded_default(tmp_path):
    assert load_config(tmp_path / "config.yaml", Config) == Config()
    assert Config().gateway.drain_timeout == 30.0
    assert Config().model.provider == "offline"


def test_values_override_defaults(tmp_path):
    path = write(
        tmp_path / "config.yaml",
        "gateway:\n  drain_timeout: 5\n  busy: queue\n"
        "fallback_providers:\n  - {provider: openai, model: gpt, api_key_env: OPENAI_KEY}\n"
        "timezone: Europe/Berlin\n",
    )
    config = load_config(path, Config)
    assert config.gateway.drain_timeout == 5.0
    assert config.gateway.busy == "queue"
    assert config.gateway.thread_sessions_per_user is True
    assert config.fallback_providers[0].model == "gpt"
    assert config.secret_names() == ["OPENAI_KEY"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "gateway:\n  drain_timout: 5\n",
            "unknown key drain_timout in gateway (did you mean drain_timeout?)",
        ),
        (
            "platforms:\n  telegram: {token_evn: T}\n",
            "unknown key token_evn in platforms['telegram'] (did you mean token_env?)",
        ),
        ("nonsense: 1\n", "unknown key nonsense at the top level"),
        ("gateway:\n  drain_timeout: soon\n", "gateway.drain_timeout: expected a number"),
        ("gateway:\n  drain_timeout: -1\n", "gateway.drain_timeout: must be greater than 0"),
        ("gateway:\n  busy: panic\n", "gateway.busy: must be one of"),
        ("gateway:\n  busy_mode: queue\n", "busy_mode is now gateway.busy"),
        ("gateway:\n  local:\n    port: 70000\n", "gateway.local.port: must be a port number"),
        ("agent:\n  max_turns: '5'\n", "agent.max_turns: expected a whole number, got '5'"),
        ("cron:\n  mirror_delivery: yes please\n", "cron.mirror_delivery: expected true or false"),
        ("fallback_providers:\n  - {url: x}\n", "unknown key url in fallback_providers[0]"),
        ("timezone: Mars/Olympus\n", "timezone: unknown timezone 'Mars/Olympus'"),
        ("gateway: 3\n", "gateway: expected a mapping"),
        ("media:\n  cache_mb: 5\n", "media.cache_mb: 5 cannot hold one file of max_file_mb"),
        (
            "media:\n  speak: {platforms: [telegram]}\n",
            "media.speak.base_url: voice replies need the speech",
        ),
        (
            "media:\n  speak: {base_url: 'http://x', platforms: [slack]}\n",
            "media.speak.platforms: slack not under platforms",
        ),
        ("model: {provider: p, model: m, image_max_px: 10}\n", "image_max_px: must be at least 64"),
        ("- a list\n", "the top level must be a mapping"),
        ("gateway:\n  drain_timeout: [\n", "not valid YAML (line 3"),
        ("1: one\nnull: two\n", "unknown keys 1, None at the top level"),
        ("gateway:\n  local: " + "[" * 2000 + "]" * 2000 + "\n", "not valid YAML: nested too deep"),
    ],
)
def test_bad_config_names_the_key_and_the_file(tmp_path, text, message):
    path = write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config(path, Config)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def refusal(path: Path) -> str:
    """The one-line message a bad file gets."""
    with pytest.raises(ConfigError) as info:
        load_config(path, Config)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"])
def test_yaml_1_1_words_are_not_booleans(tmp_path, word):
    path = write(tmp_path / "config.yaml", f"cron:\n  mirror_delivery: {word}\n")
    assert refusal(path) == f"cron.mirror_delivery: expected true or false, got {word!r}"


@pytest.mark.parametrize("word", ["true", "True", "TRUE", "false", "False", "FALSE"])
def test_only_true_and_false_are_booleans(tmp_path, word):
    path = write(tmp_path / "config.yaml", f"gateway:\n  thread_sessions_per_user: {word}\n")
    assert load_config(path, Config).gateway.thread_sessions_per_user is (word.lower() == "true")


def test_yaml_1_1_words_stay_text_where_text_belongs(tmp_path):
    path = write(tmp_path / "config.yaml", "model:\n  provider: on\n  model: yes\n")
    assert load_config(path, Config).model.provider == "on"
    assert load_config(path, Config).model.model == "yes"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "gateway:\n  drain_timeout: .nan\n",
            "gateway.drain_timeout: expected a finite number, got nan",
        ),
        ("cron:\n  lease_seconds: .inf\n", "cron.lease_seconds: expected a finite number, got inf"),
        (
            "cron:\n  heartbeat_seconds: -.inf\n",
            "cron.heartbeat_seconds: expected a finite number, got -inf",
        ),
        ("agent:\n  max_turns: .NaN\n", "agent.max_turns: expected a finite number, got nan"),
    ],
)
def test_nan_and_infinity_are_refused(tmp_path, text, message):
    assert refusal(write(tmp_path / "config.yaml", text)) == message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_from_anywhere_are_refused(value):
    data = {"gateway": {"local": {"port": value}}, "cron": {"lease_seconds": value}}
    with pytest.raises(ConfigError) as info:
        parse_config(data, "test", Config)
    assert str(info.value) == (
        f"test: gateway.local.port: expected a finite number, got {value!r}; "
        f"cron.lease_seconds: expected a finite number, got {value!r}"
    )


def test_a_latin_1_file_is_refused(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes("# my settings\ntimezone: Europe/Berlin  # café\n".encode("latin-1"))
    assert refusal(path) == "not UTF-8 text (line 2: byte 0xe9)"


def test_a_binary_file_is_refused(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(bytes(range(256)))
    assert refusal(path) == "not UTF-8 text (line 2: byte 0x80)"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00")  # valid UTF-8, but control characters
    assert refusal(path) == "not a YAML text file: character U+007F at offset 0"


def test_a_dotenv_that_is_not_utf_8_is_refused(tmp_path):
    path = tmp_path / ".env"
    path.write_bytes(b"KEY=\xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        Secrets.load(path, environ={})
    assert str(info.value) == f"{path}: not UTF-8 text (line 1: byte 0xff)"


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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)), "not UTF-8 text"),
        (b"cron:\n  mirror_delivery: yes\n", "cron.mirror_delivery: expected true or false"),
        (b"gateway:\n  drain_timeout: .nan\n", "gateway.drain_timeout: expected a finite number"),
    ],
)
def test_cli_unusable_config_is_one_line_and_status_2(home, content, message):
    home.config_path.write_bytes(content)
    for command in (["config", "show"], ["serve"]):
        result = hermes(*command)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
        assert result.stderr.startswith(f"hermes: {home.config_path}: {message}")
        assert "Traceback" not in result.stderr
        assert READY_LINE not in result.stdout


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
