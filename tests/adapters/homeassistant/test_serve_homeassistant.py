"""Home Assistant end to end: one `hermes serve` process for the module, with Telegram (the
fake Bot API: Ann an owner, Bob a user) and Home Assistant (the fake HA) beside it, and the
fake model. The tools act on the fake's entities (an owner's lock call waits for her yes; a
user is offered none); a subscribed change starts a turn answered in Telegram; HA
restarting is a reconnect that subscribes again, and invents nothing of what changed
while it was down."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from hermes.home import HermesHome
from tests.adapters.homeassistant.serving import BOB, HOME_CHAT, HomeAssistantServe
from tests.adapters.homeassistant.test_connection import garage_id
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.adapters.telegram.serving import TOKEN as TELEGRAM_TOKEN
from tests.fakes.homeassistant import FakeHomeAssistant
from tests.fakes.openai import FakeOpenAI, text_answer, tool_answer
from tests.fakes.telegram import FakeTelegram, parse_markdown_v2
from tests.seed import rows

pytestmark = pytest.mark.timeout(60)
HA_TOOLS = {"ha_states", "ha_call_service", "ha_history"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[Any, ...]]:
    """Serve on a home of the module's own, started once, with its fakes."""
    home = HermesHome(tmp_path_factory.mktemp("ha") / "hermes-home").ensure()
    with FakeTelegram(token=TELEGRAM_TOKEN) as tg, FakeHomeAssistant() as ha, FakeOpenAI() as model:
        serve = HomeAssistantServe(home, tg, model, ha)
        serve.configure()
        try:
            serve.start()
            ha.wait_subscribed(2)
            yield serve, tg, ha, model
            serve.stop()
            assert ha.internal_errors == []
        finally:
            serve.close()


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """The module's serve outlives each test: `shared` stops it, and checks it exited
    cleanly, once the module is done (tests/conftest.py's check is per test)."""
    yield


def said_in(tg: FakeTelegram, chat: int) -> list[str]:
    return [parse_markdown_v2(s["text"]) for s in tg.sent_to(chat)]


async def said(tg: FakeTelegram, chat: int, count: int) -> list[str]:
    """What the bot said in `chat`, once it said `count` things there."""
    await in_thread(lambda: tg.wait_sent(count, 30.0, chat_id=chat))
    return said_in(tg, chat)


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["body"]["messages"] if m["role"] == "tool"]


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request["body"].get("tools") or []}


async def test_an_owner_reads_the_home_turns_a_light_on_and_a_lock_waits_for_her_yes(shared):
    serve, tg, ha, model = shared
    before = len(tg.sent_to(ANN))
    model.script(
        tool_answer(("ha_states", {"area": "garage"}), ("ha_states", {"domain": "lock"})),
        text_answer("The garage is closed."),
    )
    tg.message("what is open?", chat_id=ANN)
    assert (await said(tg, ANN, before + 1))[-1] == "The garage is closed."
    request = model.requests[-1]
    assert HA_TOOLS <= offered(request)
    garage, locks = tool_results(request)
    assert {e["entity_id"]: e["state"] for e in garage["entities"]} == {
        "cover.garage_door": "closed",
        "binary_sensor.garage_door": "off",
    }
    assert locks["entities"] == [
        {"entity_id": "lock.front_door", "state": "locked", "name": "Front Door"}
    ]
    sql = "SELECT DISTINCT untrusted FROM messages WHERE role = 'tool' AND tool_name = 'ha_states'"
    marks = rows(serve.home.state_db, sql)
    assert marks == [("Home Assistant's answer (names its devices gave)",)]  # as a web page's

    target = {"entity_id": "light.kitchen", "label_id": "evening"}  # a label reaches HA too
    model.script(
        tool_answer(
            (
                "ha_call_service",
                {
                    "domain": "light",
                    "service": "turn_on",
                    "target": target,
                    "data": {"brightness_pct": 40},
                },
            )
        ),  # fmt: skip
        tool_answer(("ha_history", {"entity_id": "light.kitchen", "hours": 1})),
        text_answer("The kitchen light is on."),
    )
    tg.message("kitchen light on please", chat_id=ANN)
    prompt = await in_thread(lambda: tg.wait_sent(before + 2, 30.0, chat_id=ANN))
    asked = parse_markdown_v2(prompt[-1]["text"])  # the states it read were the devices' words
    assert "ha_call_service light.turn_on" in asked and "holds untrusted text" in asked
    assert ha.state_of("light.kitchen") == "off"
    tg.press(prompt[-1], label="Approve")
    assert (await said(tg, ANN, before + 4))[-1] == "The kitchen light is on."
    assert ha.state_of("light.kitchen") == "on"
    call = ha.calls[-1]
    assert (call["domain"], call["service"]) == ("light", "turn_on")
    assert call["data"] == {"entity_id": "light.kitchen", "label_id": "evening",
                            "brightness_pct": 40}  # fmt: skip
    called, history = tool_results(model.requests[-1])[-2:]
    assert called["changed"][0]["state"] == "on"
    assert [c["state"] for c in history["changes"]] == ["off", "on"]

    calls = len(ha.calls)
    unlock = {"domain": "lock", "service": "unlock", "target": {"entity_id": "lock.front_door"}}
    model.script(tool_answer(("ha_call_service", unlock)), text_answer("Unlocked."))
    tg.message("unlock the front door", chat_id=ANN)
    prompt = await in_thread(lambda: tg.wait_sent(before + 5, 30.0, chat_id=ANN))
    asked = parse_markdown_v2(prompt[-1]["text"])
    assert "ha_call_service lock.unlock" in asked and "confirm names lock" in asked
    assert len(ha.calls) == calls and ha.state_of("lock.front_door") == "locked"
    tg.press(prompt[-1], label="Approve")
    await in_thread(lambda: ha.wait_calls(calls + 1, 30.0))
    assert ha.state_of("lock.front_door") == "unlocked"
    await in_thread(lambda: tg.wait_sent(before + 7, 30.0, chat_id=ANN))  # the yes, the answer
    assert said_in(tg, ANN)[-1] == "Unlocked."

    lock = {**unlock, "service": "lock"}
    model.script(tool_answer(("ha_call_service", lock)), text_answer("Left it."))
    tg.message("lock it again", chat_id=ANN)
    prompt = await in_thread(lambda: tg.wait_sent(before + 8, 30.0, chat_id=ANN))
    tg.press(prompt[-1], label="Deny")
    await in_thread(lambda: tg.wait_sent(before + 10, 30.0, chat_id=ANN))
    assert said_in(tg, ANN)[-1] == "Left it."
    [denied] = tool_results(model.requests[-1])[-1:]
    assert denied["status"] == "denied" and "not run" in denied["error"]
    assert len(ha.calls) == calls + 1 and ha.state_of("lock.front_door") == "unlocked"


async def test_a_user_is_offered_no_home_tools_and_a_call_of_one_is_refused(shared):
    serve, tg, ha, model = shared
    calls = len(ha.calls)
    on = {"domain": "light", "service": "turn_on", "target": {"entity_id": "light.kitchen"}}
    model.script(tool_answer(("ha_call_service", on)), text_answer("I cannot."))
    tg.message("turn the light on", chat_id=BOB, user_id=BOB, username="bob", first_name="Bob")
    assert await said(tg, BOB, 1) == ["I cannot."]
    assert not HA_TOOLS & offered(model.requests[-2])
    refused = [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert "not available to a user" in refused[-1]
    assert len(ha.calls) == calls


async def test_a_subscribed_change_is_answered_in_telegram_and_other_changes_start_nothing(
    shared,
):
    serve, tg, ha, model = shared
    before, home = len(tg.sent_to(ANN)), len(tg.sent_to(HOME_CHAT))
    model.script(text_answer("The garage door opened."), text_answer("The lamp went off."))
    ha.set_state("binary_sensor.garage_door", "on")
    assert (await said(tg, ANN, before + 1))[-1] == "The garage door opened."
    asked = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert asked[-1]["content"] == "Garage Door Open is now on"
    ha.set_state("light.living_room", "off")
    assert (await said(tg, HOME_CHAT, home + 1))[-1] == "The lamp went off."
    asked = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert asked[-1]["content"] == "light.living_room: on -> off"
    ha.set_state("binary_sensor.garage_door", "off")  # not `to: on`
    ha.set_state("light.kitchen", "off")  # not the lamp's entity
    model.script(text_answer("Open again."))  # a subscribed change after them, on one socket:
    ha.set_state("binary_sensor.garage_door", "on")  # once it is in, they were read
    assert (await said(tg, ANN, before + 2))[-1] == "Open again."
    mine = [r for r in serve.journal() if r[0] == "homeassistant"]
    assert [r[1].split(":")[0] for r in mine] == ["garage", "lamp", "garage"]


async def test_ha_restarting_is_a_reconnect_that_subscribes_again_and_invents_nothing(shared):
    serve, tg, ha, model = shared
    subscribed, before = len(ha.subscriptions), len(tg.sent_to(ANN))
    journal = [r for r in serve.journal() if r[0] == "homeassistant"]
    missed = ha.restart([["binary_sensor.garage_door", "on"], ["binary_sensor.garage_door", "off"]])
    assert missed == 1
    renewed = await in_thread(lambda: ha.wait_subscribed(subscribed + 2, 30.0))
    assert {s["socket"] for s in renewed[-2:]} == {len(ha.sockets)}  # the new socket's two
    model.script(text_answer("It opened again."))
    context = ha.set_state("binary_sensor.garage_door", "on")
    assert (await said(tg, ANN, before + 1))[-1] == "It opened again."
    mine = [r for r in serve.journal() if r[0] == "homeassistant"]
    assert mine[: len(journal)] == journal
    assert [r[1] for r in mine[len(journal) :]] == [garage_id(ha, context)]  # once, only it
