"""Self-tests of the fake Home Assistant (tests/fakes/homeassistant.py) against its REST
and WebSocket APIs as HA documents them, driven with httpx and trio-websocket as a client
would. Nothing sleeps: each step waits on the answer or the fake's record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.fakes.homeassistant import TOKEN, FakeHomeAssistant

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def ha() -> Iterator[FakeHomeAssistant]:
    with FakeHomeAssistant() as fake:
        yield fake
        assert fake.internal_errors == []


def api(fake: FakeHomeAssistant, method: str, path: str, token: str = TOKEN,
        **kwargs: Any) -> httpx.Response:  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.request(method, f"{fake.url}/api/{path}", headers=headers, timeout=5, **kwargs)


async def frame(ws: WebSocketConnection) -> dict[str, Any]:
    with trio.fail_after(5):
        return json.loads(await ws.get_message())


def socket(fake: FakeHomeAssistant) -> str:
    return fake.url.replace("http", "ws", 1) + "/api/websocket"


async def authed(ws: WebSocketConnection, token: str = TOKEN) -> dict[str, Any]:
    """The answer to `auth` with `token`, after `auth_required`."""
    assert (await frame(ws))["type"] == "auth_required"
    await ws.send_message(json.dumps({"type": "auth", "access_token": token}))
    return await frame(ws)


def test_rest_needs_the_token_and_a_service_call_changes_the_state(ha):
    assert api(ha, "GET", "").json() == {"message": "API running."}
    assert api(ha, "GET", "states", token="nope").status_code == 401
    states = {s["entity_id"]: s["state"] for s in api(ha, "GET", "states").json()}
    assert states["light.kitchen"] == "off" and states["lock.front_door"] == "locked"
    changed = api(ha, "POST", "services/light/turn_on", json={"entity_id": "light.kitchen"})
    assert [s["state"] for s in changed.json()] == ["on"] and ha.state_of("light.kitchen") == "on"
    assert ha.calls[0]["data"] == {"entity_id": "light.kitchen"}
    assert api(ha, "POST", "services/light/explode", json={}).status_code == 400
    area = api(ha, "POST", "template", json={"template": '{{ area_entities("garage") | tojson }}'})
    assert json.loads(area.text) == ["cover.garage_door", "binary_sensor.garage_door"]
    assert api(ha, "POST", "template", json={"template": "{{ states.lock }}"}).status_code == 400
    history = api(ha, "GET", "history/period/2000-01-01T00:00:00+00:00",
                  params={"filter_entity_id": "light.kitchen", "minimal_response": ""})  # fmt: skip
    assert [s["state"] for s in history.json()[0]] == ["off", "on"]


async def test_the_socket_authenticates_subscribes_pings_and_hears_changes(ha):
    async with open_websocket_url(socket(ha)) as ws:
        said = await authed(ws, token="nope")
        assert said == {"type": "auth_invalid", "message": "Invalid access token or password"}
        with pytest.raises(ConnectionClosed):
            await frame(ws)
    async with open_websocket_url(socket(ha)) as ws:
        assert (await authed(ws))["type"] == "auth_ok"
        trigger = {"platform": "state", "entity_id": ["binary_sensor.garage_door"], "to": "on"}
        await ws.send_message(
            json.dumps({"id": 1, "type": "subscribe_trigger", "trigger": trigger})
        )
        assert (await frame(ws))["success"] is True
        await ws.send_message(json.dumps({"id": 2, "type": "subscribe_events",
                                          "event_type": "state_changed"}))  # fmt: skip
        assert (await frame(ws))["success"] is True
        await ws.send_message(json.dumps({"id": 2, "type": "ping"}))
        assert (await frame(ws))["error"]["code"] == "id_reuse"
        await ws.send_message(json.dumps({"id": 3, "type": "ping"}))
        assert await frame(ws) == {"id": 3, "type": "pong"}
        context = ha.set_state("binary_sensor.garage_door", "on")
        by_id = {f["id"]: f["event"] for f in [await frame(ws), await frame(ws)]}
        assert by_id[1]["variables"]["trigger"]["to_state"]["state"] == "on"
        assert by_id[1]["context"]["id"] == context == by_id[2]["context"]["id"]
        assert by_id[2]["data"]["entity_id"] == "binary_sensor.garage_door"
        ha.set_state("binary_sensor.garage_door", "off")  # not `to`: the events' subscriber's
        assert (await frame(ws))["id"] == 2
        assert ha.restart([["binary_sensor.garage_door", "on"]]) == 1
        with pytest.raises(ConnectionClosed):
            await frame(ws)
    assert len(ha.pushed) == 3  # the change while it was down was told to nobody
    async with open_websocket_url(socket(ha)) as ws:
        assert (await authed(ws))["type"] == "auth_ok"
