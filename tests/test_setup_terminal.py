"""`hermes setup` in a real terminal (a pty, driven by pexpect) against the Telegram and
Slack fakes and the fake model: the whole wizard to its round trip, a wrong token asked
again with the platform's own words, and an existing config kept unless agreed. Each
step waits on what the terminal shows."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Iterator

import dotenv
import pexpect
import pytest

from hermes.adapters.registry import SECTIONS
from hermes.config import load_config
from hermes.gateway.pidfile import serve_holds
from hermes.gateway.settings import Config
from hermes.home import HermesHome
from tests.adapters.telegram.serving import TOKEN
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.processes import HERMES
from tests.seed import rows

DOWN, ENTER, SPACE, CLEAR = "\x1b[B", "\r", " ", "\x15"  # keys; CLEAR: Ctrl-U, the line
PORTS = "gateway:\n  local:\n    port: 0\nops:\n  enabled: false\n"  # parallel tests' serves


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def stop_serve(home: HermesHome) -> Iterator[None]:
    """The serve the wizard left running (it outlives the wizard, by design), stopped:
    SIGTERM and waited for (this process is its subreaper, so its parent now)."""
    yield
    if serve_holds(home.serve_pid):
        pid = int(home.serve_pid.read_text())
        os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(ChildProcessError):  # not ours to reap: the check waits
            os.waitpid(pid, 0)


def wizard(home: HermesHome, *args: str) -> pexpect.spawn:
    """`hermes setup` in a pty of 40x120. prompt_toolkit asks the terminal where its cursor
    is and waits a second for the answer a real terminal gives: told not to ask here."""
    env = {**os.environ, "HERMES_HOME": str(home.root), "TERM": "xterm",
           "PROMPT_TOOLKIT_NO_CPR": "1"}  # fmt: skip
    child = pexpect.spawn(HERMES[0], [*HERMES[1:], "setup", *args], env=env, encoding="utf-8",
                          timeout=60, dimensions=(40, 120))  # fmt: skip
    child.logfile_read = open(home.root / "wizard.log", "w")  # noqa: SIM115 - the child's
    return child


def answer(child: pexpect.spawn, question: str, keys: str) -> None:
    child.expect(question)
    child.send(keys)


def screen(home: HermesHome) -> str:
    """What the wizard wrote, its terminal codes left out."""
    text = (home.root / "wizard.log").read_text()
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.long
def test_the_wizard_ends_with_the_round_trip_answered(home, tg, slack, model, stop_serve):
    """The model tried; Telegram and Slack picked, Telegram's first token refused (asked
    again with Telegram's words); owners found by the codes they send; config.yaml and
    .env written; a message to each owner sent and answered; the table says so."""
    home.config_path.write_text(PORTS)  # kept: --yes agrees to the rest
    fakes = ["--model-base-url", model.url, "--telegram-base-url", tg.url,
             "--slack-base-url", slack.url]  # fmt: skip
    child = wizard(home, *fakes, "--yes", "--no-service", "--wait", "60")
    answer(child, "Which model answers", DOWN + ENTER)
    answer(child, "A name for the provider", CLEAR + "fake" + ENTER)
    answer(child, "The model:", "m" + ENTER)
    answer(child, "API key", "sk-model-secret" + ENTER)
    answer(child, "Which chat platforms", SPACE + DOWN + SPACE + ENTER)  # telegram, slack
    answer(child, "telegram token", "1:wrong" + ENTER)
    child.expect("telegram said: rejected: Telegram refused the token \\(401 Unauthorized\\)")
    answer(child, "telegram token", TOKEN + ENTER)
    answer(child, "slack token", BOT_TOKEN + ENTER)
    answer(child, "slack app token", APP_TOKEN + ENTER)
    answer(child, "Who else may talk to the bot on telegram", ENTER)
    answer(child, "Who else may talk to the bot on slack", "U7" + ENTER)
    child.expect(r"Send this code to your bot on telegram \(a direct message\): (\w+)")
    tg.message(f"here: {child.match[1]}", user_id=4242)
    child.expect(r"Send this code to your bot on slack \(a direct message\): (\w+)")
    slack.message(child.match[1], user="U42")
    child.expect("Answer it there")
    tg.message("hello hermes", user_id=4242)
    slack.message("hello hermes", user="U42")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, screen(home)[-2000:]

    shown = screen(home)
    table = shown[shown.index("platform  token") :].splitlines()
    assert re.match(r"telegram +@hermes_test_bot \(id \d+\) +4242 +sent +received", table[1])
    assert re.match(r"slack +hermes in Test \(user UBOT\) +U42 +sent +received", table[2])
    config = load_config(home.config_path, Config, SECTIONS)
    assert config.gateway.local.port == 0 and not config.ops.enabled  # what was there
    assert config.model.provider == "fake" and config.model.api_key_env == "FAKE_API_KEY"
    assert config.gateway.owners == ("telegram:4242", "slack:U42")
    assert set(config.gateway.allowed_users) == {"telegram:4242", "slack:U42", "slack:U7"}
    assert config.platforms["telegram"].home_channel == "4242"
    assert dotenv.dotenv_values(home.env_path) == {
        "FAKE_API_KEY": "sk-model-secret", "TELEGRAM_TOKEN": TOKEN,
        "SLACK_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN,
    }  # fmt: skip
    for secret in ("sk-model-secret", TOKEN, BOT_TOKEN, APP_TOKEN):
        assert secret not in shown  # hidden as typed, never printed back
    greeting = "hermes is set up"
    assert any(greeting in s["text"] for s in tg.sent_to(4242))
    assert any(greeting in s["text"] for s in slack.sent_to("D1"))
    answered = rows(home.state_db, "SELECT platform, user_id FROM inbound_journal"
                    " WHERE text = 'hello hermes'")  # fmt: skip
    assert sorted(answered) == [("slack", "U42"), ("telegram", "4242")]


def test_an_existing_config_is_kept_unless_agreed(home: HermesHome, model):
    """The diff is shown; answering no (the default) leaves config.yaml and .env as they
    were."""
    before = "gateway:\n  rate_limit: 5\n"
    home.config_path.write_text(before)
    child = wizard(home, "--model-provider", "fake", "--model-base-url", model.url,
                   "--model-name", "m", "--no-round-trip", "--no-service")  # fmt: skip
    answer(child, "API key", ENTER)  # none
    answer(child, "Which chat platforms", ENTER)  # none
    child.expect(re.escape(f"{home.config_path} exists; setup would change it so:"))
    answer(child, "Replace .* with this", ENTER)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "+  provider: fake" in screen(home)
    assert f"kept {home.config_path} as it is; nothing was written" in screen(home)
    assert home.config_path.read_text() == before
    assert not home.env_path.exists()


def test_setup_platform_adds_one_and_keeps_the_rest(home: HermesHome, tg):
    """`hermes setup platform telegram` on a config with a model: the model stays."""
    home.config_path.write_text("model:\n  provider: x\n  model: m\n  base_url: http://h/v1\n")
    child = wizard(home, "platform", "telegram", "--telegram-base-url", tg.url,
                   "--owner", "telegram:1001", "--no-round-trip", "--no-service")  # fmt: skip
    answer(child, "telegram token", TOKEN + ENTER)
    answer(child, "Who else may talk", ENTER)
    answer(child, "Replace .* with this", "y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, screen(home)[-2000:]
    config = load_config(home.config_path, Config, SECTIONS)
    assert (config.model.provider, config.model.base_url) == ("x", "http://h/v1")
    assert config.platforms["telegram"].token_env == "TELEGRAM_TOKEN"
    assert config.gateway.owners == ("telegram:1001",)
