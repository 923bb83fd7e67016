"""`hermes serve` as a real process with Home Assistant beside its Telegram adapter (the
fake Bot API, where the subscriptions' answers go and where Ann, an owner, and Bob, a
user, talk to the agent that has the Home Assistant tools), against the fake HA."""

from __future__ import annotations

from typing import Any

import yaml

from hermes.adapters.homeassistant.adapter import change_id
from tests.adapters.telegram.serving import ANN, TelegramServe
from tests.fakes.homeassistant import TOKEN, FakeHomeAssistant

BOB = 1002  # allowed, not an owner
HOME_CHAT = -100778  # Telegram's home channel, where the `lights` subscription answers
TOKEN_VAR = "HOMEASSISTANT_TOKEN"
SUBSCRIPTIONS: dict[str, dict[str, Any]] = {
    "garage": {  # a state trigger, answered in Ann's chat
        "entities": ["binary_sensor.garage_door"],
        "to": "on",
        "prompt": "{trigger.to_state.attributes.friendly_name} is now {trigger.to_state.state}",
        "deliver": f"telegram:{ANN}",
    },
    "lamp": {  # state_changed events of one entity, answered in the home channel
        "event": "state_changed",
        "entities": ["light.living_room"],
        "prompt": "{data.entity_id}: {data.old_state.state} -> {data.new_state.state}",
        "deliver": "home:telegram",
    },
}


def garage_id(ha: FakeHomeAssistant, context: str) -> str:
    """The event id of the garage door's latest change, made in `context`."""
    door = "binary_sensor.garage_door"
    return change_id("garage", context, door, ha.written(door))


class HomeAssistantServe(TelegramServe):
    """Serve with `platforms.homeassistant` (SUBSCRIPTIONS) on the fake HA beside Telegram
    (Ann the owner, Bob a user; its home channel HOME_CHAT); a socket idle 3 s is dead."""

    def __init__(self, home: Any, tg: Any, model: Any, ha: Any) -> None:
        super().__init__(home, tg, model)
        self.ha = ha

    def tokens(self) -> dict[str, str]:
        return {**super().tokens(), TOKEN_VAR: TOKEN}

    def configure(self, *args, **kwargs) -> None:
        access = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"
        super().configure(*args, access=access, **kwargs)
        config = yaml.safe_load(self.home.config_path.read_text())
        config["platforms"]["telegram"]["home_channel"] = str(HOME_CHAT)
        config["platforms"]["telegram"]["progress"] = "off"  # the tests count messages
        config["platforms"]["homeassistant"] = {
            "token_env": TOKEN_VAR,
            "base_url": self.ha.url,
            "idle_timeout": 3,
            "subscriptions": SUBSCRIPTIONS,
        }
        config["agent"] = {"approval_timeout": 30}
        self.home.config_path.write_text(yaml.safe_dump(config))
