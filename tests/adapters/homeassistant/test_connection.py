"""The Home Assistant adapter in this process (tests/adapters/inprocess.py) against the fake
HA: a refused token is fatal with HA's reason and never retried; a half-open socket misses
the progress deadline and is replaced by one that subscribes again; doctor's check asks
`GET /api/` with the adapter's own code. And the section's checks of what it is given."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from hermes.actors.link import FATAL
from hermes.adapters.homeassistant.adapter import HomeAssistantAdapter, change_id
from hermes.adapters.homeassistant.config import HomeAssistantConfig, Subscription
from hermes.config import BadValue, Secrets, structure
from hermes.ops.doctor import check_platform
from tests.adapters.homeassistant.serving import TOKEN_VAR, garage_id
from tests.adapters.inprocess import Admissions, running
from tests.fakes.homeassistant import TOKEN, FakeHomeAssistant

pytestmark = pytest.mark.timeout(30)
GARAGE = Subscription(entities=("binary_sensor.garage_door",), prompt="{trigger.entity_id}",
                      deliver="none")  # fmt: skip


LIGHTS = Subscription(event="state_changed", entities=("light.kitchen", "light.living_room"),
                      prompt="{data.entity_id} is {data.new_state.state}",
                      deliver="none")  # fmt: skip


def config(ha: FakeHomeAssistant, subscriptions=None, **more) -> HomeAssistantConfig:
    return HomeAssistantConfig(token_env=TOKEN_VAR, base_url=ha.url,
                               subscriptions=subscriptions or {"garage": GARAGE},
                               **more)  # fmt: skip


def secrets(token: str = TOKEN) -> Secrets:
    return Secrets({TOKEN_VAR: token}, frozenset())


async def test_a_refused_token_is_fatal_with_home_assistants_reason():
    with FakeHomeAssistant() as ha:
        async with running(HomeAssistantAdapter, "homeassistant", config(ha), secrets("nope"),
                           Admissions()) as run:  # fmt: skip
            await run.status.reach(FATAL)
            assert "Invalid access token or password" in (run.status.reason or "")
            assert run.restarts == 0 and ha.subscriptions == []
            assert "nope" not in run.status.reason


async def test_a_half_open_socket_is_replaced_and_subscribed_again():
    admissions = Admissions()
    with FakeHomeAssistant() as ha:
        async with running(HomeAssistantAdapter, "homeassistant", config(ha, idle_timeout=0.6),
                           secrets(), admissions) as run:  # fmt: skip
            await trio.to_thread.run_sync(ha.wait_subscribed, 1)
            ha.half_open()
            await trio.to_thread.run_sync(ha.wait_subscribed, 2)
            context = ha.set_state("binary_sensor.garage_door", "on")
            garage = garage_id(ha, context)
            await admissions.wait_for(garage)
            assert run.status.state != FATAL
    assert admissions.ids == [garage]
    assert admissions.events[0].text == "binary_sensor.garage_door"
    assert admissions.events[0].answer_to == "none"


async def test_each_change_one_service_call_makes_is_a_turn_of_its_own():
    """HA gives every change of one call (a scene, a script) the call's context."""
    admissions = Admissions()
    lights = ["light.kitchen", "light.living_room"]
    with FakeHomeAssistant() as ha:
        async with running(HomeAssistantAdapter, "homeassistant",
                           config(ha, subscriptions={"lights": LIGHTS}), secrets(),
                           admissions):  # fmt: skip
            await trio.to_thread.run_sync(ha.wait_subscribed, 1)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                url = f"{ha.url}/api/services/homeassistant/toggle"
                (await http.post(url, json={"entity_id": lights})).raise_for_status()
            first, second = await trio.to_thread.run_sync(ha.wait_pushed, 2)
            assert first["context"] == second["context"]
            ids = [change_id("lights", first["context"], e, ha.written(e)) for e in lights]
            await admissions.wait_for(*ids)
    assert sorted(admissions.ids) == sorted(ids)
    assert sorted(e.text for e in admissions.events) == [
        "light.kitchen is on",
        "light.living_room is off",
    ]


async def test_an_event_that_comes_while_the_next_subscription_is_set_up_is_kept():
    admissions = Admissions()
    with FakeHomeAssistant() as ha:
        ha.change_when_subscribed(1, "binary_sensor.garage_door", "on")
        subscriptions = {"garage": GARAGE, "lights": LIGHTS}
        async with running(HomeAssistantAdapter, "homeassistant",
                           config(ha, subscriptions=subscriptions), secrets(),
                           admissions):  # fmt: skip
            [pushed] = await trio.to_thread.run_sync(ha.wait_pushed, 1)
            garage = garage_id(ha, pushed["context"])
            await admissions.wait_for(garage)
        taken = ha.subscriptions
    assert [s["id"] for s in taken] == [1, 2]  # it came between the two
    assert admissions.ids == [garage]


async def test_a_trigger_without_to_starts_nothing_on_a_change_of_attributes_alone():
    admissions = Admissions()
    door = "binary_sensor.garage_door"
    with FakeHomeAssistant() as ha:
        async with running(HomeAssistantAdapter, "homeassistant", config(ha), secrets(),
                           admissions):  # fmt: skip
            await trio.to_thread.run_sync(ha.wait_subscribed, 1)
            ha.set_state(door, "off")  # as it was: an update of its attributes
            garage = garage_id(ha, ha.set_state(door, "on"))
            await admissions.wait_for(garage)  # the later change came: the first would have
    assert admissions.ids == [garage]


async def test_doctor_asks_the_api_with_the_token_and_names_a_refusal():
    with FakeHomeAssistant() as ha:
        good = await check_platform("homeassistant", config(ha), secrets(), Path("/h/.env"))
        bad = await check_platform("homeassistant", config(ha), secrets("nope"), Path("/h/.env"))
    assert good.ok and good.detail == f"API running. ({ha.url})"
    assert not bad.ok and "refused the token (HTTP 401)" in bad.detail
    assert bad.fix.startswith(f"set {TOKEN_VAR} in") and "long-lived access token" in bad.fix
    assert [r["path"] for r in ha.refused] == ["/api"]


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"entities": ["light.x"], "deliver": "none"}, "prompt: required"),
        ({"prompt": "p", "deliver": "none"}, "entities or event"),
        ({"event": "state_changed", "to": "on", "prompt": "p", "deliver": "none"}, "to: only"),
        ({"entities": ["Light X"], "prompt": "p", "deliver": "none"}, "not an entity id"),
        ({"entities": ["light.x"], "prompt": "{a b}", "deliver": "none"}, "is not a field"),
        ({"entities": ["light.x"], "prompt": "p", "deliver": "homeassistant:x"}, "not a chat"),
        ({"entities": ["light.x"], "prompt": "p", "deliver": "webhook:ci"}, "not a chat"),
        ({"event": "state_changed", "prompt": "p", "deliver": "none"}, "entities: required"),
    ],
)
def test_a_subscription_that_cannot_work_is_refused_naming_why(given, problem):
    with pytest.raises((BadValue, ValueError), match=problem):
        structure({"subscriptions": {"s": given}}, HomeAssistantConfig)


def test_a_subscription_is_a_trigger_or_an_event_subscription():
    trigger = Subscription(entities=("cover.garage_door",), to="open", prompt="p", deliver="none")
    assert trigger.command() == {"type": "subscribe_trigger", "trigger": {
        "platform": "state", "entity_id": ["cover.garage_door"], "to": "open"}}  # fmt: skip
    any_change = Subscription(entities=("cover.garage_door",), prompt="p", deliver="none")
    assert any_change.command()["trigger"]["to"] is None  # HA: not attribute-only changes
    events = Subscription(event="call_service", prompt="p", deliver="home:telegram")
    assert events.command() == {"type": "subscribe_events", "event_type": "call_service"}
