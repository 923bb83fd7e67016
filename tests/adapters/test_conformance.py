"""The adapter conformance kit: what every adapter and its fake must show, run against a
real `hermes serve` process and parametrized over the adapters: the local endpoint,
the test platform (python -m tests.adapters.serve adds its adapter), Telegram, Slack
and Discord (built in, against their fakes in tests/fakes/).

Each driver speaks to serve the way its platform's users do (the local endpoint: a
WebSocket client; the chat platforms: messages injected into their fakes) and reads
what the user got back. A kit item runs on every adapter whose platform has the thing
it tests: the local endpoint is a server (no progress deadline, no token to refuse,
no bots), so the liveness items run on the chat platforms; Telegram never delivers
an update it was told was received again, nor Slack an acknowledged envelope (a
repeat comes only across a restart, which the kill item covers), nor Discord a
dispatch outside a Resume, so the replay step runs where the platform replays.
"Deaf" is each platform's way of going silent: a stalled poll, a hung poll, a
half-open socket, a gateway that stops acknowledging heartbeats.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import trio

from tests.adapters.discord.serving import DiscordServe
from tests.adapters.serving import TOKEN, Serve, in_thread, serving, until_line
from tests.adapters.slack.serving import SlackServe
from tests.adapters.telegram.serving import TOKEN as TELEGRAM_TOKEN
from tests.adapters.telegram.serving import TelegramServe
from tests.fakes.chat_platform import FakeChatPlatform
from tests.fakes.discord import TOKEN as DISCORD_TOKEN
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import text_answer
from tests.fakes.slack import BOT_TOKEN as SLACK_TOKEN
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram, parse_markdown_v2


class LocalDriver:
    """A user of `hermes chat`: one chat.send per message, named by its message id."""

    name = "local"
    replays = True

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.answers: list[str] = []

    async def say(self, text: str, ref: str) -> None:
        reply = await self.serve.rpc("chat.send", {"text": text, "session": "kit",
                                                   "message_id": ref})  # fmt: skip
        result = reply["result"]
        if result["status"] != "duplicate":
            self.answers.append(result["text"])

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def say_ignoring_the_end() -> None:
            try:
                await self.say(text, ref)
            except Exception:  # serve is killed under it
                pass

        nursery.start_soon(say_ignoring_the_end)

    async def say_again(self, text: str, ref: str) -> None:
        await self.say(text, ref)

    def received(self) -> list[str]:
        return self.answers


class PlatformDriver:
    """A user of the test platform: messages injected into its fake."""

    name = "testplatform"
    replays = True
    deaf_restarts = True  # deaf: the progress deadline replaces the connection
    token = TOKEN
    fatal = "401"

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.platform = serve.platform
        self.updates: dict[str, int] = {}

    async def say(self, text: str, ref: str) -> None:
        before = len(self.platform.sent)
        self.updates[ref] = self.platform.inject(text)
        await in_thread(self.platform.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self.updates[ref] = self.platform.inject(text)

    async def say_again(self, text: str, ref: str) -> None:
        again = self.platform.replay(self.updates[ref])
        await in_thread(self.platform.wait_acked, again, 30.0)

    def received(self) -> list[str]:
        return [s["text"] for s in self.platform.sent]

    def polls(self) -> int:
        return self.platform.polls

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.platform.wait_polls(count, timeout)

    def deafen(self) -> None:
        self.platform.stall()

    def undeafen(self) -> None:
        self.platform.unstall()

    def revoke_token(self) -> None:
        self.platform.revoke_token()

    async def say_as_bot(self, text: str) -> None:
        await in_thread(self.platform.wait_acked, self.platform.inject(text, is_bot=True), 30.0)


class TelegramDriver:
    """A Telegram user: messages injected into the fake Bot API, in a private chat."""

    name = "telegram"
    replays = False  # a confirmed update is never delivered again
    deaf_restarts = True
    token = TELEGRAM_TOKEN
    fatal = "401"

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.tg: FakeTelegram = serve.platform

    async def say(self, text: str, ref: str) -> None:
        before = len(self.tg.sent)
        self.tg.message(text)
        await in_thread(self.tg.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self.tg.message(text)

    def received(self) -> list[str]:
        return [parse_markdown_v2(s["text"]) for s in self.tg.sent]  # as the user sees it

    def polls(self) -> int:
        return self.tg.polls

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.tg.wait_polls(count, timeout)

    def deafen(self) -> None:
        self.tg.hang_polls()

    def undeafen(self) -> None:
        self.tg.unhang_polls()

    def revoke_token(self) -> None:
        self.tg.revoke_token()

    async def say_as_bot(self, text: str) -> None:
        update = self.tg.message(text, is_bot=True)
        await in_thread(self.tg.wait_acked, update, 30.0)


class SlackDriver:
    """A Slack user: DMs injected into the fake as Socket Mode events."""

    name = "slack"
    replays = False  # an acknowledged envelope is never delivered again
    deaf_restarts = True
    token = SLACK_TOKEN
    fatal = "link_disabled"

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.slack: FakeSlack = serve.platform

    async def say(self, text: str, ref: str) -> None:
        before = len(self.slack.sent)
        self.slack.message(text)
        await in_thread(self.slack.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        self.slack.message(text)

    def received(self) -> list[str]:
        return [s["text"] for s in self.slack.sent]

    def polls(self) -> int:
        return self.slack.connections_opened

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.slack.wait_connections(count, timeout)

    def deafen(self) -> None:
        self.slack.half_open()

    def undeafen(self) -> None:
        """A half-open socket stays so; the new one is live."""

    def revoke_token(self) -> None:
        self.slack.disable_link()
        self.slack.disconnect("link_disabled")

    async def say_as_bot(self, text: str) -> None:
        event = self.slack.message(text, bot_id="B9")
        await in_thread(self.slack.wait_acked, event, 30.0)


class DiscordDriver:
    """A Discord user: DMs injected into the fake Gateway as MESSAGE_CREATE."""

    name = "discord"
    replays = False  # a dispatch is delivered again only within a Resume
    deaf_restarts = False  # a silent gateway is a zombie, resumed in the connection
    token = DISCORD_TOKEN
    fatal = "4004"

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.discord: FakeDiscord = serve.platform

    async def say(self, text: str, ref: str) -> None:
        await in_thread(self.discord.wait_identifies, 1)  # Discord keeps nothing for no one
        before = len(self.discord.sent)
        self.discord.message(text)
        await in_thread(self.discord.wait_sent, before + 1, 30.0)

    def start_saying(self, nursery: trio.Nursery, text: str, ref: str) -> None:
        async def once_identified() -> None:
            await in_thread(self.discord.wait_identifies, 1)
            self.discord.message(text)

        nursery.start_soon(once_identified)

    def received(self) -> list[str]:
        return [s["content"] for s in self.discord.sent]

    def polls(self) -> int:
        return self.discord.connections

    def wait_polls(self, count: int, timeout: float = 30.0) -> None:
        self.discord.wait_connections(count, timeout)

    def deafen(self) -> None:
        self.discord.zombie()

    def undeafen(self) -> None:
        """The zombie socket is gone; the new one is live."""

    def revoke_token(self) -> None:
        self.discord.close(4004)

    async def say_as_bot(self, text: str) -> None:
        before = len(self.discord.dispatches)
        self.discord.message(text, author_bot=True)
        await in_thread(
            self.discord.wait_until, lambda fake: len(fake.dispatches) > before, 30.0, "it"
        )


@contextlib.contextmanager
def running(name: str, home, model) -> Iterator[Serve]:
    """Serve on the test's home with `name`'s fake (the local endpoint: the test
    platform's harness, which has the endpoint too)."""
    if name == "telegram":
        fake, harness = FakeTelegram(token=TELEGRAM_TOKEN), TelegramServe
    elif name == "slack":
        fake, harness = FakeSlack(), SlackServe
    elif name == "discord":
        fake, harness = FakeDiscord(), DiscordServe
    else:
        fake, harness = FakeChatPlatform(token=TOKEN), Serve
    with fake, serving(harness, fake, home, model) as serve:
        yield serve


DRIVERS = {"local": LocalDriver, "testplatform": PlatformDriver, "telegram": TelegramDriver,
           "slack": SlackDriver, "discord": DiscordDriver}  # fmt: skip
CONNECTED = ("testplatform", "telegram", "slack", "discord")  # a connection to keep, a token, bots


@pytest.fixture(params=sorted(DRIVERS))
def driver(request, home, model):
    with running(request.param, home, model) as serve:
        yield DRIVERS[request.param](serve)


@pytest.fixture(params=CONNECTED)
def connected(request, home, model):
    with running(request.param, home, model) as serve:
        yield DRIVERS[request.param](serve)


@pytest.fixture(params=[n for n in CONNECTED if DRIVERS[n].deaf_restarts])
def deaf(request, home, model):
    """Where going deaf is caught by the progress deadline (Discord's gateway catches
    a silent connection by its heartbeats first: tests/adapters/discord)."""
    with running(request.param, home, model) as serve:
        yield DRIVERS[request.param](serve)


@pytest.mark.timeout(90)
async def test_an_event_is_admitted_then_answered_and_a_duplicate_is_answered_once(model, driver):
    serve = driver.serve
    model.script(text_answer("hello back"))
    serve.start()
    await driver.say("hello", "m1")
    assert driver.received() == ["hello back"]
    [(platform, _, _)] = serve.journal()  # in the journal before it was acknowledged
    assert platform == driver.name
    if driver.replays:
        await driver.say_again("hello", "m1")  # delivered again: recognised, not answered
    serve.stop()
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert driver.received() == ["hello back"]
    assert len(model.requests) == 1


@pytest.mark.timeout(120)
async def test_serve_killed_after_admission_answers_once_after_the_restart(model, driver):
    serve = driver.serve
    model.delay = 30.0  # the turn is in flight when serve is killed
    serve.start()
    async with trio.open_nursery() as nursery:
        driver.start_saying(nursery, "are you there?", "m1")
        await in_thread(model.wait_requests, 1)
        serve.kill()
    assert [state for *_, state in serve.journal()] == ["started"]
    model.delay = 0.0
    model.script(text_answer("yes, here"))
    serve.start()
    await in_thread(model.wait_requests, 2)  # resumed once
    log = serve.stop()  # the drain lets the resumed turn finish
    assert "resuming" in log
    assert serve.assistant_replies() == ["yes, here"]
    assert [state for *_, state in serve.journal()] == ["answered"]
    if driver.name != "local":  # the user sees it once, marked as after a restart
        assert driver.received() == ["(answered after hermes restarted) yes, here"]
    assert len(model.requests) == 2


@pytest.mark.timeout(90)
async def test_a_missed_progress_deadline_restarts_the_adapter_with_backoff(model, deaf):
    connected = deaf
    serve, name = connected.serve, connected.name
    serve.start()
    await in_thread(connected.wait_polls, 1)
    connected.deafen()  # polls are taken and never answered
    polls = connected.polls()
    await in_thread(until_line, serve.procs[-1], "no progress for")  # the deadline passed
    adapter = (await serve.status())[name]  # within the first backoff (1 s)
    assert adapter.detail["adapter"] == "backing off", adapter.detail
    assert "no progress for" in adapter.detail["reason"]
    await in_thread(connected.wait_polls, polls + 1, 30.0)  # a new connection polls again
    adapter = (await serve.status())[name]
    assert adapter.restarts >= 1
    connected.undeafen()
    model.script(text_answer("back"))
    await connected.say("hi", "m1")
    adapter = (await serve.status())[name]
    assert adapter.detail["adapter"] == "live"
    serve.stop()


@pytest.mark.timeout(90)
async def test_a_fatal_error_stops_the_restarts_and_says_why(model, connected):
    serve, name = connected.serve, connected.name
    serve.start()
    await in_thread(connected.wait_polls, 1)
    connected.revoke_token()
    await in_thread(until_line, serve.procs[-1], "not restarting")
    polls = connected.polls()
    adapter = (await serve.status())[name]
    assert adapter.detail["adapter"] == "fatal" and connected.fatal in adapter.detail["reason"]
    with pytest.raises(TimeoutError):  # nobody polls any more: no restart
        await in_thread(connected.wait_polls, polls + 1, 3.0)
    assert (await serve.status())[name].restarts == 0
    serve.stop()
    log = (serve.home.logs / "hermes.log").read_text()
    assert connected.token not in log  # nor any URL with it


@pytest.mark.timeout(90)
async def test_a_bots_message_is_ignored(model, connected):
    serve = connected.serve
    serve.start()
    await connected.say_as_bot("I am a bot")
    model.script(text_answer("to the human"))
    await connected.say("and I am not", "m2")
    serve.stop()
    assert connected.received() == ["to the human"]
    states = [state for *_, state in serve.journal()]  # refused where it was admitted at all
    assert states in (["refused", "answered"], ["answered"])
    assert len(model.requests) == 1
