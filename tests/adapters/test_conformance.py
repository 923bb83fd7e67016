"""The adapter conformance kit: what every adapter and its fake must show, run against a
real `hermes serve` process (python -m tests.adapters.serve, which adds the test
platform's adapter) and parametrized over the adapters.

Each driver speaks to serve the way its platform's users do (the local endpoint: a
WebSocket client; the test platform: messages injected into its fake) and reads what
the user got back. A kit item runs on every adapter whose platform has the thing it
tests: the local endpoint is a server (no progress deadline, no token to refuse, no
bots), so the liveness items run on the platforms that have them.
"""

from __future__ import annotations

import pytest
import trio

from tests.adapters.serving import TOKEN, Serve, in_thread, until_line
from tests.fakes.openai import text_answer


class LocalDriver:
    """A user of `hermes chat`: one chat.send per message, named by its message id."""

    name = "local"

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


DRIVERS = {"local": LocalDriver, "testplatform": PlatformDriver}


@pytest.fixture(params=sorted(DRIVERS))
def driver(request, serve):
    return DRIVERS[request.param](serve)


@pytest.mark.timeout(90)
async def test_an_event_is_admitted_then_answered_and_a_duplicate_is_answered_once(
    serve, model, driver
):
    model.script(text_answer("hello back"))
    serve.start()
    await driver.say("hello", "m1")
    assert driver.received() == ["hello back"]
    [(platform, _, _)] = serve.journal()  # in the journal before it was acknowledged
    assert platform == driver.name
    await driver.say_again("hello", "m1")  # delivered again: recognised, not answered
    serve.stop()
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert driver.received() == ["hello back"]
    assert len(model.requests) == 1


@pytest.mark.timeout(120)
async def test_serve_killed_after_admission_answers_once_after_the_restart(serve, model, driver):
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
    if driver.name == "testplatform":  # the user sees it once, marked as after a restart
        assert driver.received() == ["(answered after hermes restarted) yes, here"]
    assert len(model.requests) == 2


@pytest.mark.timeout(90)
async def test_a_missed_progress_deadline_restarts_the_adapter_with_backoff(serve, model):
    serve.start()
    platform = serve.platform
    await in_thread(platform.wait_polls, 1)
    platform.stall()  # deaf: polls are taken and never answered
    polls = platform.polls
    await in_thread(until_line, serve.procs[-1], "no progress for")  # the deadline passed
    adapter = (await serve.status())["testplatform"]  # within the first backoff (1 s)
    assert adapter.detail["adapter"] == "backing off", adapter.detail
    assert "no progress for" in adapter.detail["reason"]
    await in_thread(platform.wait_polls, polls + 1, 30.0)  # a new connection polls again
    adapter = (await serve.status())["testplatform"]
    assert adapter.restarts >= 1
    platform.unstall()
    model.script(text_answer("back"))
    await PlatformDriver(serve).say("hi", "m1")
    adapter = (await serve.status())["testplatform"]
    assert adapter.detail["adapter"] == "live"
    serve.stop()


@pytest.mark.timeout(90)
async def test_a_fatal_error_stops_the_restarts_and_says_why(serve, model):
    serve.start()
    platform = serve.platform
    await in_thread(platform.wait_polls, 1)
    platform.revoke_token()
    await in_thread(until_line, serve.procs[-1], "not restarting")
    polls = platform.polls
    adapter = (await serve.status())["testplatform"]
    assert adapter.detail["adapter"] == "fatal" and "401" in adapter.detail["reason"]
    with pytest.raises(TimeoutError):  # nobody polls any more: no restart
        await in_thread(platform.wait_polls, polls + 1, 3.0)
    assert (await serve.status())["testplatform"].restarts == 0
    serve.stop()
    assert TOKEN not in (serve.home.logs / "hermes.log").read_text()  # nor any URL with it


@pytest.mark.timeout(90)
async def test_a_bots_message_is_ignored(serve, model):
    serve.start()
    platform = serve.platform
    bot = platform.inject("I am a bot", is_bot=True)
    await in_thread(platform.wait_acked, bot, 30.0)
    model.script(text_answer("to the human"))
    await PlatformDriver(serve).say("and I am not", "m2")
    serve.stop()
    assert platform.sent and [s["text"] for s in platform.sent] == ["to the human"]
    assert [state for *_, state in serve.journal()] == ["refused", "answered"]
    assert len(model.requests) == 1
