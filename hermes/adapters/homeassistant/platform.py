"""Home Assistant as hermes knows it: a way in, not a chat. The events its subscriptions
name start turns in their own conversations, answered where each says (a chat of
another platform, a home channel, or nowhere); and its section offers the agent the
tools that read and act on the home (hermes/agent/tools/homeassistant.py). What an event
says came from the home's devices (an entity's name is whatever the device called it)."""

from hermes.adapters.homeassistant.config import HomeAssistantConfig
from hermes.adapters.platform import Limit, Platform

HOMEASSISTANT = Platform(
    "homeassistant",
    Limit(4000, "chars"),  # nothing is sent here; a mirror of an answer is split so
    "hermes.adapters.homeassistant.adapter:HomeAssistantAdapter",
    secret_variables=("HOMEASSISTANT_*", "HASS_*"),
    token_hint="a long-lived access token (your profile in Home Assistant > Security)",
    settings=HomeAssistantConfig,
    foreign_text="a Home Assistant event (names its devices gave)",
    asks=("base_url", "token_env"),
    way_in=True,
    tools="hermes.agent.tools.homeassistant:homeassistant_tools",
)
