"""`hermes setup`'s pure parts (config.yaml with only what differs, its comments and diff;
.env kept but for what setup sets) and its non-interactive form, flags only, as a
process against the Telegram fake and the fake model. The terminal runs are
tests/test_setup_terminal.py."""

from __future__ import annotations

import io
import os
import stat

import dotenv
import pytest
import yaml

from hermes.adapters.registry import SECTIONS
from hermes.cli.config_file import commented_yaml, diff, minimal
from hermes.cli.env_file import BadSecret, set_values, with_values
from hermes.cli.exit_codes import USAGE
from hermes.config import ConfigError, load_config
from hermes.gateway.settings import Config
from tests.adapters.telegram.serving import TOKEN
from tests.fakes.openai import FakeOpenAI, error_answer
from tests.processes import hermes

# -- config.yaml ----------------------------------------------------------------------


def test_only_what_differs_from_the_defaults_is_kept():
    data = {
        "model": {"provider": "offline", "model": "hermes-offline"},  # all defaults
        "gateway": {"drain_timeout": 30.0, "owners": ["telegram:1"]},
        "platforms": {"telegram": {"token_env": "T", "poll_timeout": 30.0}, "slack": {}},
        "mcp": {"servers": {"fs": {"command": "x", "timeout": 60.0}}},
    }
    assert minimal(data) == {
        "gateway": {"owners": ["telegram:1"]},
        "mcp": {"servers": {"fs": {"command": "x"}}},
        "platforms": {"telegram": {"token_env": "T"}, "slack": {}},  # a section enables it
    }


def test_a_bad_answer_is_refused_by_the_loader_naming_its_key():
    with pytest.raises(ConfigError, match="gateway.owners"):
        minimal({"gateway": {"owners": ["123"]}})


def test_the_yaml_says_what_each_key_is_and_reads_back_as_written(tmp_path):
    data = minimal(
        {
            "model": {"provider": "openai", "model": "m", "base_url": "https://x/v1"},
            "platforms": {"slack": {"token_env": "A", "app_token_env": "B"}},
        }
    )
    text = commented_yaml(data)
    assert yaml.safe_load(text) == data
    lines = text.splitlines()
    app = lines.index("    app_token_env: B")
    assert "app-level token" in " ".join(lines[app - 2 : app])  # SlackConfig's docstring
    assert "  # The model's name, as the provider knows it." in lines
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert load_config(path, Config, SECTIONS).platforms["slack"].app_token_env == "B"


def test_the_diff_names_both_versions():
    shown = diff("a: 1\nb: 2\n", "a: 1\nb: 3\n", "config.yaml")
    assert "-b: 2\n+b: 3\n" in shown and "config.yaml (now)" in shown


# -- .env -------------------------------------------------------------------------------


def test_env_keeps_other_lines_and_reads_back_exactly():
    value = "x'y\\z #not a comment \""
    text = with_values("# mine\nA=1\nexport B=old\n", {"B": value, "C": "new"})
    assert text.startswith("# mine\nA=1\n")
    assert dotenv.dotenv_values(stream=io.StringIO(text)) == {"A": "1", "B": value, "C": "new"}


def test_env_refuses_what_it_cannot_hold_without_showing_it():
    with pytest.raises(BadSecret, match="the value of T has a line break") as caught:
        with_values("", {"T": "secret\nvalue"})
    assert "secret" not in str(caught.value).replace("the value of T", "")
    with pytest.raises(BadSecret, match="not a variable name"):
        with_values("", {"1X": "v"})


def test_env_is_written_private(tmp_path):
    path = tmp_path / ".env"
    path.write_text("KEEP=1\n")
    os.chmod(path, 0o644)
    set_values(path, {"T": "v"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "KEEP=1\nT='v'\n"


# -- non-interactive --------------------------------------------------------------------


@pytest.fixture
def fake_model():
    with FakeOpenAI() as model:
        yield model


def flags(tg, model) -> list[str]:
    return [
        "setup", "--non-interactive", "--no-round-trip",
        "--model-provider", "fake", "--model-name", "m", "--model-base-url", model.url,
        "--model-key-env", "SETUP_MODEL_KEY",
        "--platform", "telegram", "--telegram-base-url", tg.url,
        "--telegram-token-env", "SETUP_TG_TOKEN", "--owner", "telegram:1001",
        "--allow", "telegram:1002",
    ]  # fmt: skip


SECRETS = {"SETUP_MODEL_KEY": "sk-model-secret", "SETUP_TG_TOKEN": TOKEN}


def test_non_interactive_writes_config_and_env_from_flags(home, tg, fake_model):
    done = hermes(*flags(tg, fake_model), env=SECRETS)
    assert done.returncode == 0, done.stderr
    config = load_config(home.config_path, Config, SECTIONS)
    assert config.model.provider == "fake" and config.model.api_key_env == "SETUP_MODEL_KEY"
    assert config.platforms["telegram"].token_env == "SETUP_TG_TOKEN"
    assert config.platforms["telegram"].base_url == tg.url
    assert config.gateway.owners == ("telegram:1001",)
    assert set(config.gateway.allowed_users) == {"telegram:1001", "telegram:1002"}
    env = dotenv.dotenv_values(home.env_path)
    assert env == SECRETS
    assert stat.S_IMODE(home.env_path.stat().st_mode) == 0o600
    assert len(fake_model.requests) == 1  # the model was tried once, with its key
    assert fake_model.requests[0]["auth"] == "Bearer sk-model-secret"
    for secret in SECRETS.values():
        assert secret not in done.stdout + done.stderr + home.config_path.read_text()
    assert "@hermes_test_bot" in done.stdout  # what getMe said


def test_non_interactive_names_the_missing_flag(home, tg, fake_model):
    args = [a for a in flags(tg, fake_model) if a not in ("--owner", "telegram:1001")]
    done = hermes(*args, env=SECRETS)
    assert done.returncode == USAGE
    assert "--owner is missing" in done.stderr
    assert not home.config_path.exists() and not home.env_path.exists()


def test_non_interactive_refused_token_and_model_say_why_and_write_nothing(home, tg, fake_model):
    done = hermes(*flags(tg, fake_model), env={**SECRETS, "SETUP_TG_TOKEN": "1:wrong"})
    assert done.returncode == USAGE
    assert "telegram: rejected: " in done.stderr and "Unauthorized" in done.stderr
    fake_model.script(error_answer(401, "invalid api key"))
    done = hermes(*flags(tg, fake_model), env=SECRETS)
    assert done.returncode == USAGE
    assert "the model did not answer" in done.stderr and "401" in done.stderr
    assert "sk-model-secret" not in done.stderr
    assert not home.config_path.exists() and not home.env_path.exists()


def test_an_existing_config_is_shown_and_kept_without_yes(home, tg, fake_model):
    home.config_path.write_text("gateway:\n  rate_limit: 5\n")
    done = hermes(*flags(tg, fake_model), env=SECRETS)
    assert done.returncode == USAGE and "--yes is missing" in done.stderr
    assert "-gateway:\n-  rate_limit: 5\n" not in done.stdout  # kept, and the diff shown:
    assert "+    token_env: SETUP_TG_TOKEN" in done.stdout
    assert home.config_path.read_text() == "gateway:\n  rate_limit: 5\n"
    done = hermes(*flags(tg, fake_model), "--yes", env=SECRETS)
    assert done.returncode == 0, done.stderr
    config = load_config(home.config_path, Config, SECTIONS)
    assert config.gateway.rate_limit == 5  # what was there stays
    assert config.platforms["telegram"].token_env == "SETUP_TG_TOKEN"
