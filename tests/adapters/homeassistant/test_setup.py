"""`hermes setup platform homeassistant`, as an operator runs it without questions: the
server and the token asked (`Platform.asks`), the token checked against the fake HA's
`GET /api/` before anything is written, and no owner to find (a way in has no chat)."""

from __future__ import annotations

import dotenv

from hermes.adapters.registry import SECTIONS
from hermes.config import load_config
from hermes.gateway.settings import Config
from tests.fakes.homeassistant import TOKEN, FakeHomeAssistant
from tests.processes import hermes


def test_setup_asks_the_server_and_the_token_and_checks_it(home):
    with FakeHomeAssistant() as ha:
        server = ("--homeassistant-base-url", ha.url, "--homeassistant-token-env", "HA_TOKEN")
        args = ("setup", "platform", "homeassistant", "--non-interactive", "--no-round-trip")
        args += server
        refused = hermes(*args, env={"HA_TOKEN": "nope"}, timeout=30)
        assert refused.returncode != 0 and "refused the token (HTTP 401)" in refused.stderr
        assert not home.config_path.exists()
        done = hermes(*args, env={"HA_TOKEN": TOKEN}, timeout=30)
    assert done.returncode == 0, done.stderr
    section = load_config(home.config_path, Config, SECTIONS).platforms["homeassistant"]
    assert (section.base_url, section.token_env) == (ha.url, "HA_TOKEN")
    assert dotenv.dotenv_values(home.env_path) == {"HA_TOKEN": TOKEN}
    assert TOKEN not in done.stdout + done.stderr
