"""The inbound webhooks' section: a route that cannot work is refused when config.yaml is
read, in one line naming the route and the key; its secret is a secret serve requires and
redacts; its role decides who owns its turns."""

from __future__ import annotations

import pytest

from hermes.adapters.registry import SECTIONS
from hermes.adapters.webhook.config import WebhookConfig
from hermes.config import ConfigError, Secrets, parse_config
from hermes.gateway.roles import role_of
from hermes.gateway.settings import Config
from hermes.gateway.tree import check_platforms
from hermes.operations.pairing import owner_settings
from tests.adapters.webhook.serving import ROUTES, event_of

GOOD = {"secret_env": "CI_SECRET", "prompt": "{repository.full_name}", "deliver": "telegram:1"}


def read(route: dict, name: str = "ci") -> Config:
    return parse_config({"platforms": {"webhook": {"routes": {name: route}}}}, "c.yaml", Config,
                        SECTIONS)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"prompt": "{repository full_name}"}, "routes['ci'].prompt: '{repository full_name}'"),
        ({"prompt": "a { b"}, "routes['ci'].prompt: a lone '{'"),
        ({"prompt": "  "}, "routes['ci'].prompt: the prompt is empty"),
        ({"deliver": "telegram"}, "routes['ci'].deliver: 'telegram' is not a target"),
        ({"deliver": "home:"}, "routes['ci'].deliver: 'home:' is not a target"),
        ({"deliver": "irc:#x"}, "routes['ci'].deliver: 'irc' is not a chat platform"),
        ({"deliver": "webhook:ci"}, "routes['ci'].deliver: 'webhook' is not a chat platform"),
        ({"deliver": "api:alice"}, "routes['ci'].deliver: 'api' is not a chat platform"),
        ({"signature": "sha1"}, "routes['ci'].signature: must be one of 'github', 'generic'"),
        ({"header": "X Sig"}, "routes['ci'].header: 'X Sig' is not a header name"),
        ({"secret_env": "not a var"}, "routes['ci'].secret_env: 'not a var' is not the name"),
        ({"secret_env": None}, "routes['ci'].secret_env: required"),
        ({"prompt": None}, "routes['ci'].prompt: required"),
        ({"deliver": None}, "routes['ci'].deliver: required"),
        ({"role": "admin"}, "routes['ci'].role: must be one of 'owner', 'user'"),
        ({"secrets_env": "X"}, "unknown key secrets_env in platforms['webhook'].routes['ci']"),
    ],
)
def test_a_route_that_cannot_work_is_refused_naming_the_route_and_the_key(change, said):
    route = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as info:
        read(route)
    assert said in str(info.value), str(info.value)


def test_a_route_name_is_a_path_segment():
    with pytest.raises(ConfigError, match="'CI/x' is not a route name"):
        read(GOOD, name="CI/x")


def test_targets_of_every_kind_are_taken():
    for deliver in ("telegram:-100123", "slack:C01:1700.1", "home:telegram", "none"):
        config = read({**GOOD, "deliver": deliver})
        assert config.platforms["webhook"].routes["ci"].deliver == deliver


def test_each_routes_secret_is_required_at_start_and_kept_out_of_commands(tmp_path):
    config = parse_config({"platforms": {"webhook": {"routes": ROUTES}}}, "c.yaml", Config,
                          SECTIONS)  # fmt: skip
    section = config.platforms["webhook"]
    assert isinstance(section, WebhookConfig)
    names = section.token_names()
    assert names and set(names) <= set(config.secret_names())  # redacted, out of commands
    with pytest.raises(ConfigError, match=f"the token variable {names[0]} is not set"):
        check_platforms(config, Secrets({}, frozenset()), tmp_path / ".env")
    values = {**dict.fromkeys(names, "s3cret"), "TG": "1:x"}
    secrets = Secrets(values, frozenset())
    with pytest.raises(ConfigError, match=r"platforms.webhook.routes.ci.deliver: its answers go"
                       r" to telegram, which is not enabled"):  # fmt: skip
        check_platforms(config, secrets, tmp_path)
    telegram = {"token_env": "TG", "enabled": True}
    data = {"platforms": {"webhook": {"routes": ROUTES}, "telegram": telegram}}
    config = parse_config(data, "c.yaml", Config, SECTIONS)
    check_platforms(config, secrets, tmp_path)


async def test_a_routes_role_says_whose_turns_its_deliveries_start():
    routes = {"ci": {**GOOD, "role": "owner"}, "form": GOOD}
    config = parse_config({"platforms": {"webhook": {"routes": routes}}}, "c.yaml", Config,
                          SECTIONS)  # fmt: skip

    async def nobody(_platform: str) -> frozenset[str]:
        return frozenset()

    assert await role_of(event_of("ci"), config, nobody) == "owner"
    assert await role_of(event_of("form"), config, nobody) == "user"
    assert owner_settings(config, "webhook") == ["platforms.webhook.owner"]
