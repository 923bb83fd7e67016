"""Which `ha_call_service` calls wait for an owner's yes, by what they act on, read as Home
Assistant reads a call: ids split on commas and lower-cased, `all` in any case, a scene's
`entities`, any area, device, label or floor, and the domains that can run anything."""

from __future__ import annotations

import pytest

from hermes.adapters.homeassistant.config import CONFIRMED
from hermes.agent.tools.homeassistant import _asked

LOCKS = ("lock", "alarm_control_panel", "cover")  # a `confirm` without the default's rest


@pytest.mark.parametrize(
    ("confirm", "domain", "service", "body", "why"),
    [
        (LOCKS, "scene", "apply", {"entities": {"lock.front_door": "unlocked"}}, "lock"),
        (LOCKS, "scene", "create", {"entities": {"COVER.garage_door": "open"}}, "cover"),
        (
            LOCKS,
            "homeassistant",
            "toggle",
            {"entity_id": "light.porch, cover.garage_door"},
            "cover",
        ),  # fmt: skip
        (LOCKS, "homeassistant", "turn_on", {"entity_id": ["light.porch,lock.back"]}, "lock"),
        (LOCKS, "homeassistant", "turn_off", {"entity_id": "COVER.garage_door"}, "cover"),
        (LOCKS, "light", "turn_on", {"entity_id": "ALL"}, "every entity"),
        (LOCKS, "light", "turn_on", {"entity_id": " All "}, "every entity"),
        (LOCKS, "light", "turn_on", {"area_id": "garage"}, "area_id"),
        (LOCKS, "light", "turn_on", {"device_id": "abc"}, "device_id"),
        (LOCKS, "switch", "turn_on", {"label_id": "doors"}, "label_id"),
        (LOCKS, "switch", "turn_on", {"floor_id": "ground"}, "floor_id"),
        (CONFIRMED, "script", "turn_on", {"entity_id": "script.open_up"}, "names script"),
        (CONFIRMED, "automation", "trigger", {"entity_id": "automation.x"}, "automation"),
        (CONFIRMED, "button", "press", {"entity_id": "button.door"}, "names button"),
        (CONFIRMED, "homeassistant", "restart", {}, "names homeassistant"),
        (CONFIRMED, "homeassistant", "stop", {}, "names homeassistant"),
        (CONFIRMED, "hassio", "addon_stdin", {"addon": "x"}, "names hassio"),
        (CONFIRMED, "shell_command", "anything", {}, "names shell_command"),
        (CONFIRMED, "scene", "turn_on", {"entity_id": "scene.night"}, "names scene"),
    ],
)
def test_a_call_that_can_reach_a_guarded_entity_is_asked(confirm, domain, service, body, why):
    [reason] = _asked(confirm, domain, service, body)
    assert why in reason


@pytest.mark.parametrize(
    ("confirm", "domain", "service", "body"),
    [
        (CONFIRMED, "light", "turn_on", {"entity_id": "light.kitchen, light.porch"}),
        (CONFIRMED, "light", "turn_on", {"entity_id": ["light.kitchen"], "brightness_pct": 5}),
        (LOCKS, "scene", "apply", {"entities": {"light.kitchen": "on"}}),
        ((), "light", "turn_on", {"entity_id": "all"}),  # `confirm: []` asks about nothing
        ((), "lock", "unlock", {"area_id": "hall"}),
    ],
)
def test_a_call_of_nothing_guarded_is_not_asked(confirm, domain, service, body):
    assert _asked(confirm, domain, service, body) == []
