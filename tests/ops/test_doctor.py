"""`hermes doctor` as an operator runs it: a real process, against the fake platforms
(real servers on 127.0.0.1), a real state.db and real sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import attrs
import pytest

from hermes.adapters.contract import Target
from hermes.adapters.registry import SECTIONS
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets, load_config
from hermes.cron.schedule import Schedule
from hermes.cron.store import NewJob, create_job
from hermes.delivery.outbox_store import enqueue, mark_dead, mark_sending
from hermes.gateway.settings import Config
from hermes.ops.doctor import check_platform, check_ports
from tests.fakes.discord import TOKEN as DISCORD_TOKEN
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.processes import hermes, wait_ready
from tests.seed import writing

TELEGRAM_TOKEN = "123456:TEST-token"
TOKENS = {
    "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
    "SLACK_BOT_TOKEN": BOT_TOKEN,
    "SLACK_APP_TOKEN": APP_TOKEN,
    "DISCORD_BOT_TOKEN": DISCORD_TOKEN,
}
WRONG = {
    "telegram": ("TELEGRAM_BOT_TOKEN", "999999:wrong-secret-tg"),
    "slack": ("SLACK_BOT_TOKEN", "xoxb-wrong-secret-slack"),
    "discord": ("DISCORD_BOT_TOKEN", "wrong-secret-discord"),
}
ALL_CHECKS = {
    *("config", "telegram token", "slack token", "discord token", "state.db", "sandbox"),
    *("commands", "persona", "skills", "context", "local port", "ops port", "dead letters"),
    *("cron jobs", "browser"),
}


@attrs.frozen
class Fakes:
    telegram: FakeTelegram
    slack: FakeSlack
    discord: FakeDiscord


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    for name in TOKENS:  # the tokens come from HERMES_HOME/.env only
        monkeypatch.delenv(name, raising=False)
    with (
        FakeTelegram(token=TELEGRAM_TOKEN) as telegram,
        FakeSlack() as slack,
        FakeDiscord() as discord,
    ):
        yield Fakes(telegram, slack, discord)


def configure(home, fakes: Fakes, tokens: dict[str, str], local_port: int = 0) -> None:
    """The three built-in platforms pointed at their fakes, tokens in .env."""
    home.config_path.write_text(
        f"gateway:\n  local:\n    port: {local_port}\nops:\n  port: 0\nplatforms:\n"
        f"  telegram:\n    token_env: TELEGRAM_BOT_TOKEN\n    base_url: '{fakes.telegram.url}'\n"
        "  slack:\n    token_env: SLACK_BOT_TOKEN\n    app_token_env: SLACK_APP_TOKEN\n"
        f"    base_url: '{fakes.slack.url}'\n"
        f"  discord:\n    token_env: DISCORD_BOT_TOKEN\n    base_url: '{fakes.discord.url}'\n"
    )
    home.env_path.write_text("".join(f"{k}={v}\n" for k, v in tokens.items()))


def doctor(**env: str) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Exit status, each check's (status, rest of its line) by name, and all output
    (`env`: variables to set for it)."""
    done = hermes("doctor", timeout=30, env=env)
    checks = {}
    for line in done.stdout.splitlines():
        checks[line[6:22].strip()] = (line[:5].strip(), line[23:])
    assert len(checks) == len(done.stdout.splitlines()), done.stdout  # one line per check
    return done.returncode, checks, done.stdout + done.stderr


def test_all_good_exits_0_with_an_ok_line_per_check(home, fakes, require_system):
    require_system("/usr/bin/bwrap", packages=("bubblewrap",))
    configure(home, fakes, TOKENS)
    with writing(home.state_db):  # the schema, as serve makes it
        pass
    status, checks, output = doctor()
    assert status == 0, output
    assert set(checks) == ALL_CHECKS
    assert {s for s, _ in checks.values()} == {"ok"}, output
    assert "@hermes_test_bot" in checks["telegram token"][1]
    assert "integrity ok" in checks["state.db"][1]
    assert checks["commands"][1] == (
        "backend host; an owner's run on host, after untrusted text sandbox (network public);"
        " a user's sandbox (network none)"
    )
    # Each platform's own auth endpoint was asked, by the adapter's code.
    assert [c["method"] for c in fakes.telegram.calls] == ["getMe"]
    assert [(c["method"], c["token"]) for c in fakes.slack.calls] == [("auth.test", "bot")]
    assert [c["path"] for c in fakes.discord.calls] == ["/api/v10/users/@me"]
    assert not any(token in output for token in TOKENS.values())


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
def test_a_rejected_token_is_a_fail_line_with_a_fix_and_exit_1(home, fakes, platform):
    variable, wrong = WRONG[platform]
    configure(home, fakes, {**TOKENS, variable: wrong})
    status, checks, output = doctor()
    assert status == 1
    verdict, rest = checks[f"{platform} token"]
    assert verdict == "FAIL" and "rejected" in rest
    assert f"fix: set {variable} in {home.env_path}" in rest
    assert wrong not in output and "secret" not in output
    others = {f"{p} token" for p in WRONG} - {f"{platform} token"}
    assert all(checks[name][0] == "ok" for name in others)


def test_a_bad_config_is_one_fail_line_and_what_needs_it_is_skipped(home):
    home.config_path.write_text("gateway:\n  drain_timeout: -1\n")
    status, checks, _ = doctor()
    assert status == 1
    verdict, rest = checks["config"]
    assert verdict == "FAIL" and "gateway.drain_timeout" in rest and "fix:" in rest
    assert set(checks) == {"config", "state.db", "dead letters", "cron jobs"}


def test_an_unknown_platform_and_a_missing_token_fail(home, monkeypatch):
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.config_path.write_text(
        "gateway:\n  local:\n    port: 0\nops:\n  port: 0\nplatforms:\n"
        "  irc:\n    token_env: IRC_TOKEN\n"
        "  telegram:\n    token_env: TELEGRAM_BOT_TOKEN\n"
        "  slack:\n    enabled: false\n"
    )
    status, checks, _ = doctor()
    assert status == 1
    verdict, rest = checks["irc token"]
    assert verdict == "FAIL" and "no adapter for 'irc'" in rest and "fix: remove" in rest
    verdict, rest = checks["telegram token"]
    assert verdict == "FAIL" and "TELEGRAM_BOT_TOKEN not set" in rest and "fix: set" in rest
    assert "slack token" not in checks  # disabled: not checked


def test_dead_letters_and_a_job_failing_in_a_row_fail(home):
    now = time.time()
    every = Schedule("interval", "every 1h", seconds=3600)
    with writing(home.state_db) as conn:
        enqueue(conn, Target("telegram", "43"), ["to a blocked chat"], "reply", "k1", now)
        mark_sending(conn, 1, now)
        mark_dead(conn, 1, "403: bot was blocked by the user", now)
        job = create_job(conn, NewJob("morning brief", every, prompt="p"), now, ZoneInfo("UTC"))
        conn.execute(
            "UPDATE cron_jobs SET failure_streak = 3, last_error = 'model down:\nHTTP 503'"
        )
    status, checks, output = doctor()
    assert status == 1, output
    verdict, rest = checks["dead letters"]
    assert verdict == "FAIL" and "403: bot was blocked" in rest and "hermes outbox" in rest
    verdict, rest = checks["cron jobs"]
    assert verdict == "FAIL" and "morning brief" in rest and "3 times" in rest
    assert "last: model down: HTTP 503" in rest  # its error's lines joined: one line
    assert f"fix: `hermes cron history {job.id}`" in rest
    assert checks["state.db"][0] == "ok"


def test_a_port_held_by_another_process_fails(home, taken_port):
    home.config_path.write_text(f"gateway:\n  local:\n    port: {taken_port}\nops:\n  port: 0\n")
    status, checks, _ = doctor()
    assert status == 1
    verdict, rest = checks["local port"]
    assert verdict == "FAIL" and "in use by another process" in rest
    assert "gateway.local.port" in rest


def test_the_webhooks_port_is_checked_where_a_platform_is_pushed_to(home, taken_port):
    home.config_path.write_text(
        f"gateway:\n  local:\n    port: 0\n  webhooks:\n    port: {taken_port}\nops:\n  port: 0\n"
    )
    names = [r.name for r in check_ports(home, load_config(home.config_path, Config, SECTIONS))]
    assert names == ["local port", "ops port"]  # no webhook platform: no listener
    home.config_path.write_text(
        home.config_path.read_text()
        + "platforms:\n  whatsapp:\n    token_env: WA_TOKEN\n    phone_number_id: '1'\n"
    )
    [*_, hooks] = check_ports(home, load_config(home.config_path, Config, SECTIONS))
    assert (hooks.name, hooks.ok) == ("webhooks port", False)
    assert "in use by another process" in hooks.detail and "gateway.webhooks.port" in hooks.fix


def test_a_port_held_by_this_homes_serve_is_fine(home, spawn):
    with socket.socket() as probe:  # a port free right now, for serve to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home.config_path.write_text(f"gateway:\n  local:\n    port: {port}\nops:\n  port: 0\n")
    serve = spawn()
    assert wait_ready(serve) == port
    status, checks, output = doctor()
    assert status == 0, output
    held = f"127.0.0.1:{port} held by this home's serve (pid {serve.pid})"
    assert checks["local port"] == ("ok", held)


async def test_a_platform_that_never_answers_fails_after_the_timeout():
    """A socket that takes the connection and never answers: the check gives up."""
    with socket.socket() as deaf:
        deaf.bind(("127.0.0.1", 0))
        deaf.listen()  # never accepted: the handshake completes, no answer ever comes
        url = f"http://127.0.0.1:{deaf.getsockname()[1]}"
        settings = PlatformConfig(token_env="DISCORD_BOT_TOKEN", base_url=url)
        secrets = Secrets({"DISCORD_BOT_TOKEN": DISCORD_TOKEN}, frozenset())
        result = await check_platform("discord", settings, secrets, Path("/x/.env"), timeout=0.5)
    assert not result.ok and result.detail == "no answer within 0.5 s"
    assert result.fix == f"check the network and platforms.discord.base_url ({url})"


def test_mcp_servers_and_the_search_key_are_checked_without_starting_anything(home, monkeypatch):
    monkeypatch.delenv("HERMES_TEST_BRAVE", raising=False)
    home.config_path.write_text(
        "gateway:\n  local:\n    port: 0\nops:\n  port: 0\nmcp:\n  servers:\n"
        f"    ok: {{command: sh, cwd: '{home.root}'}}\n"
        "    gone: {command: no-such-mcp-server-program}\n"
        "    keyed: {url: 'http://127.0.0.1:9/mcp', bearer_env: HERMES_TEST_MCP_TOKEN}\n"
        "    off: {command: no-such-program-either, enabled: false}\n"
        "web:\n  search: {provider: brave, key_env: HERMES_TEST_BRAVE}\n"
    )
    home.env_path.write_text("HERMES_TEST_MCP_TOKEN=a-secret-token\n")
    status, checks, output = doctor()
    assert status == 1
    assert checks["mcp ok"] == ("ok", "stdio sh")
    verdict, rest = checks["mcp gone"]
    assert verdict == "FAIL" and "not a program on PATH" in rest and "fix: install it" in rest
    assert checks["mcp keyed"] == ("ok", "HTTP http://127.0.0.1:9/mcp")
    assert "mcp off" not in checks  # disabled: not checked
    verdict, rest = checks["web tools"]
    assert verdict == "FAIL" and "HERMES_TEST_BRAVE (the API key of" in rest
    assert "a-secret-token" not in output


def test_without_bubblewrap_the_sandbox_fails_and_says_what_users_lose(home):
    home.config_path.write_text("gateway:\n  local:\n    port: 0\nops:\n  port: 0\n")
    status, checks, output = doctor(PATH="/nonexistent")  # no bwrap on this PATH
    assert status == 1, output
    assert checks["sandbox"] == (
        "FAIL",
        "bubblewrap is not installed (apt-get install bubblewrap): users get no terminal"
        " -- fix: apt-get install bubblewrap",
    )
    assert checks["commands"][1].endswith(
        "a user's no terminal (bubblewrap is not installed (apt-get install bubblewrap))"
    )
    assert "after untrusted text host after an owner's yes" in checks["commands"][1]
