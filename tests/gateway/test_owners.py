"""Who is an owner: config names owners as `platform:id`, and pairing makes an owner only
when the operator asks (`--owner`), never while config names anyone.

On a real state.db: the router's role of a sender, the operator action in this
process and the `hermes pairing approve` command, and config.yaml refusing a bare id.
"""

from __future__ import annotations

import time

import pytest

from hermes.actors.clock import Clock
from hermes.actors.errors import Invalid
from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.settings import GatewayConfig, PlatformConfig
from hermes.cli import exit_codes
from hermes.cli.main import main
from hermes.config import ConfigError, load_config
from hermes.gateway.roles import role_of
from hermes.gateway.settings import Config
from hermes.operations.context import NoArgs, Offline, Ops
from hermes.operations.pairing import ApproveArgs, OwnerInConfig, approve_pairing, list_pairing
from hermes.state.db import Db
from hermes.state.pairing import request_code
from tests.fakes.openai import text_answer
from tests.gateway.router_harness import running_router
from tests.processes import hermes
from tests.seed import rows, writing

NO_OWNER = Config(platforms={"telegram": PlatformConfig()})  # strangers may pair
PLATFORM_OWNER = Config(platforms={"telegram": PlatformConfig(owner="alice")})
GATEWAY_OWNER = Config(gateway=GatewayConfig(owners=("slack:zed",)), platforms=NO_OWNER.platforms)
BOTH = Config(gateway=GATEWAY_OWNER.gateway, platforms=PLATFORM_OWNER.platforms)
NAMED = [
    pytest.param(PLATFORM_OWNER, "platforms.telegram.owner names", id="platform-owner"),
    pytest.param(GATEWAY_OWNER, "gateway.owners names", id="gateway-owners-elsewhere"),
    pytest.param(BOTH, "platforms.telegram.owner and gateway.owners name", id="both"),
]
REFUSED = (
    " the owners of telegram, so pairing makes none there: approve them as a user, or name"
    " them an owner in config.yaml"
)


@pytest.fixture
async def db(registry, home):
    async with Db(registry, home.state_db) as gen:
        yield gen


def ops(db: Db, config: Config) -> Ops:
    return Ops(db, Clock(), config, Offline(), "cli")


async def ask(db: Db, user: str) -> str:
    return (await db.write(request_code, "telegram", user, user.title(), time.time(), user)).code


# -- pairing makes an owner only when asked ----------------------------------------------


async def test_the_first_approval_is_no_owner_and_owner_makes_one(db):
    first = await approve_pairing(ops(db, NO_OWNER), ApproveArgs("telegram", await ask(db, "sam")))
    assert first.owner is False  # the first on the platform, and still a user
    asked = ApproveArgs("telegram", await ask(db, "ann"), owner=True)
    assert (await approve_pairing(ops(db, NO_OWNER), asked)).owner is True
    people = (await list_pairing(ops(db, NO_OWNER), NoArgs())).approved
    assert [(a.user_id, a.owner) for a in people] == [("sam", False), ("ann", True)]
    assert rows(db.path, "SELECT user_id, owner FROM pairing_approved ORDER BY approved_at") == [
        ("sam", 0), ("ann", 1),
    ]  # fmt: skip


@pytest.mark.parametrize(("config", "setting"), NAMED)
async def test_approving_as_owner_is_refused_while_config_names_owners(db, config, setting):
    code = await ask(db, "sam")
    with pytest.raises(OwnerInConfig) as refused:
        await approve_pairing(ops(db, config), ApproveArgs("telegram", code, owner=True))
    assert str(refused.value) == setting + REFUSED
    assert isinstance(refused.value, Invalid)  # exit status 2, JSON-RPC invalid params, 400
    # Refused before the code was tried: nothing approved, no failure counted, and the
    # same code still lets them in as a user.
    assert rows(db.path, "SELECT * FROM pairing_approved") == []
    assert rows(db.path, "SELECT * FROM pairing_failures") == []
    done = await approve_pairing(ops(db, config), ApproveArgs("telegram", code))
    assert (done.user_id, done.owner) == ("sam", False)


@pytest.mark.parametrize(("config", "setting"), NAMED)
async def test_an_owner_by_pairing_is_no_owner_while_config_names_owners(
    registry, home, fake, config, setting
):
    """Also a row the first approval made owner before `--owner` existed (kept: without
    owners in config it still counts)."""
    with writing(home.state_db) as conn:
        conn.execute(
            "INSERT INTO pairing_approved (platform, user_id, approved_at, approved_by, owner)"
            " VALUES ('telegram', 'sam', 1, 'cli', 1)"
        )
    async with running_router(registry, home, fake, letting_in(config, "alice")) as h:
        assert await h.router.role(h.event("sam")) == "user"
        refused = await h.ask("sam", "/sethome")
        assert refused.text == "Only an owner can set the home channel."
        assert await h.rows("SELECT * FROM home_channels") == []
        owners = await h.router.owner_ids("telegram")
        assert "sam" not in owners
    async with running_router(registry, home, fake, letting_in(NO_OWNER, "alice")) as h:
        assert await h.router.role(h.event("sam")) == "owner"  # config names nobody


def letting_in(config: Config, *users: str) -> Config:
    """`config` with telegram letting `users` in by its allowlist (and paired users)."""
    owner = config.platforms["telegram"].owner
    platforms = {"telegram": PlatformConfig(allowed_users=users, owner=owner)}
    return Config(gateway=config.gateway, platforms=platforms)


# -- `hermes pairing approve PLATFORM CODE --owner` ------------------------------------------


TOLD = "approved telegram user {}; they {}\n"
USER, OWNER = "can talk to the agent now", "are an owner of telegram"


def approve_cli(home, *argv: str) -> int:
    return main(["pairing", "approve", "telegram", *argv])


def ask_now(home, user: str) -> str:
    with writing(home.state_db) as conn:
        return request_code(conn, "telegram", user, None, time.time()).code


def test_cli_owner_is_refused_with_status_2_naming_the_setting(home, capsys):
    home.config_path.write_text("platforms:\n  telegram:\n    enabled: false\n    owner: '42'\n")
    code = ask_now(home, "12345")
    assert approve_cli(home, code, "--owner") == exit_codes.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"hermes: platforms.telegram.owner names{REFUSED}\n"
    assert rows(home.state_db, "SELECT * FROM pairing_approved") == []
    assert approve_cli(home, code) == exit_codes.OK  # the code was not used up
    assert capsys.readouterr().out == TOLD.format("12345", USER)


def test_cli_owner_makes_an_owner_where_config_names_none(home, capsys):
    assert approve_cli(home, ask_now(home, "12345"), "--owner") == exit_codes.OK
    assert capsys.readouterr().out == TOLD.format("12345", OWNER)
    assert approve_cli(home, ask_now(home, "678")) == exit_codes.OK
    assert capsys.readouterr().out == TOLD.format("678", USER)
    owners = rows(home.state_db, "SELECT user_id, owner FROM pairing_approved ORDER BY user_id")
    assert owners == [("12345", 1), ("678", 0)]


# -- ids in gateway.owners and gateway.allowed_users are platform:id ----------------------


HOW = "write it as PLATFORM:ID, e.g. telegram:123"


@pytest.mark.parametrize("key", ["owners", "allowed_users"])
@pytest.mark.parametrize(
    ("entry", "problem"),
    [("123", "has no platform"), ("@you:example.org", "has no platform"),
     ("Telegram:123", "has no platform"), ("telegram:", "has no id"),
     ("telegram: 123", "has spaces around its id")],
)  # fmt: skip
def test_an_id_without_its_platform_is_refused(tmp_path, key, entry, problem):
    path = tmp_path / "config.yaml"
    path.write_text(f"gateway:\n  {key}: ['{entry}']\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, Config)
    assert str(info.value) == f"{path}: gateway.{key}: {entry!r} {problem}: {HOW}"


def test_a_bare_id_stops_the_command_with_status_2(home):
    home.config_path.write_text("gateway:\n  owners: ['123']\n")
    for command in (["config", "show"], ["serve"]):
        result = hermes(*command)
        assert result.returncode == 2, result.stderr
        assert result.stderr == (
            f"hermes: {home.config_path}: gateway.owners: '123' has no platform: {HOW}\n"
        )


def test_platform_ids_load_and_a_platforms_own_settings_stay_bare(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "gateway:\n  owners: ['telegram:123', 'matrix:@you:example.org']\n"
        "  allowed_users: ['whatsapp:15551234567', 'email:you@example.org']\n"
        "platforms:\n  telegram:\n    owner: '123'\n    allowed_users: ['456']\n"
    )
    config = load_config(path, Config)
    assert config.gateway.owners_on("telegram") == frozenset({"123"})
    assert config.gateway.owners_on("matrix") == frozenset({"@you:example.org"})
    assert config.gateway.owners_on("whatsapp") == frozenset()
    assert config.platforms["telegram"].allowed_users == ("456",)


async def no_pairing_owners(platform: str) -> frozenset[str]:
    return frozenset()


async def test_an_owner_id_is_an_owner_on_its_platform_only():
    """A Telegram id can equal a WhatsApp number."""
    config = Config(gateway=GatewayConfig(owners=("telegram:123",)))
    on_telegram = InboundEvent("telegram", "e1", ChatType.DM, "123", "123", "hi")
    on_whatsapp = InboundEvent("whatsapp", "e2", ChatType.DM, "123", "123", "hi")
    assert await role_of(on_telegram, config, no_pairing_owners) == "owner"
    assert await role_of(on_whatsapp, config, no_pairing_owners) == "user"


async def test_an_allowed_id_is_let_in_on_its_platform_only(registry, home, fake):
    fake.script(text_answer("hello gus"))
    config = Config(
        gateway=GatewayConfig(allowed_users=("telegram:gus",)),
        platforms={"telegram": PlatformConfig(allowed_users=("alice",)),
                   "slack": PlatformConfig(allowed_users=("alice",))},
    )  # fmt: skip
    async with running_router(registry, home, fake, config) as h:
        assert (await h.ask("gus", "hi")).text == "hello gus"
        elsewhere = await h.send("gus", "hi", platform="slack")
        assert (await h.final(elsewhere)).kind == "refused"
        assert await h.journal(elsewhere) == "refused"
    assert len(fake.requests) == 1
