"""Home Assistant's section of config.yaml: the server and its long-lived access token,
the subscriptions (what of the home starts a turn, the prompt it becomes, where the answer
goes) and the services the agent's tools ask an owner about first.

Every event of a subscription is let in (the token proves the server), one at a time per
subscription, none merged with the next: the defaults of `allow_all_users`, `busy` and
`merge_window` below say so, as an inbound webhook's do.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from hermes.adapters.deliver import deliver_target, names_of, platform_of
from hermes.adapters.settings import Busy, PlatformConfig
from hermes.adapters.template import Template, TemplateError
from hermes.config import BadValue, Role, at_least, optional_seconds, positive

ENTITY = re.compile(r"[a-z0-9_]+\.[a-z0-9_]+")
EVENT_TYPE = re.compile(r"[a-z0-9_.]{1,100}")
DOMAIN = re.compile(r"[a-z0-9_]+")
CONFIRMED = (  # what acts on a door, and what can run anything (a script that unlocks)
    "lock",
    "alarm_control_panel",
    "cover",
    "scene",
    "script",
    "automation",
    "button",
    "homeassistant",
    "hassio",
    "shell_command",
)


def _prompt(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    if not value.strip():
        raise BadValue(f"{attr.name}: the prompt is empty")
    try:
        Template.read(value)
    except TemplateError as exc:
        raise BadValue(f"{attr.name}: {exc}") from None


def _entities(_inst: Any, attr: attrs.Attribute, value: tuple[str, ...]) -> None:
    for entity in value:
        if not ENTITY.fullmatch(entity):
            raise BadValue(f"{attr.name}: {entity!r} is not an entity id (domain.object_id)")


def _event_type(_inst: Any, attr: attrs.Attribute, value: str | None) -> None:
    if value is not None and not EVENT_TYPE.fullmatch(value):
        raise BadValue(f"{attr.name}: {value!r} is not an event type (state_changed)")


def _domains(_inst: Any, attr: attrs.Attribute, value: tuple[str, ...]) -> None:
    for domain in value:
        if not DOMAIN.fullmatch(domain):
            raise BadValue(f"{attr.name}: {domain!r} is not a domain (lock, cover)")


@attrs.frozen
class Subscription:
    """One subscription: what of the home starts a turn in the subscription's own
    conversation, and where its answer goes."""

    entities: tuple[str, ...] = attrs.field(default=(), validator=_entities)
    """Entity ids (`binary_sensor.garage_door`): a change of their state is an event (a
    state trigger, `subscribe_trigger`); with `event`, only its events about them."""
    to: str | None = None
    """With `entities` alone: only a change to this state (`on`, `open`); unset, any
    change of the state (a change of an attribute alone is none)."""
    event: str | None = attrs.field(default=None, validator=_event_type)
    """An event type (`state_changed`, `call_service`, your automation's own):
    `subscribe_events` instead of a trigger (`state_changed` only with `entities`)."""
    prompt: str | None = attrs.field(default=None, validator=_prompt)
    """What an event asks the agent (required): text with `{dotted.path}` fields of the
    event (a trigger's: `{trigger.entity_id} is {trigger.to_state.state}`; an event's:
    `{event_type}: {data.entity_id}`); `{{` is a brace."""
    deliver: str | None = attrs.field(default=None, validator=deliver_target)
    """Where the answer goes (required): a chat (`telegram:123`), a platform's home
    channel (`home:telegram`), or `none` (only the subscription's conversation keeps it)."""
    role: Role = "user"
    """Whose turn an event starts: `user` (no Home Assistant tools, by the role table) or
    `owner`. Either way its text came from the home's devices: later commands of the
    turn run as `terminal.after_untrusted` says."""

    def __attrs_post_init__(self) -> None:
        for key in ("prompt", "deliver"):
            if getattr(self, key) is None:
                raise BadValue(f"{key}: required (see docs/platforms/homeassistant.md)")
        if not self.entities and self.event is None:
            raise BadValue("entities or event: name what the subscription listens to")
        if self.to is not None and (self.event is not None or not self.entities):
            raise BadValue("to: only with entities alone (a state trigger)")
        if self.event == "state_changed" and not self.entities:
            raise BadValue(
                "entities: required with event: state_changed (else every state change of"
                " every entity is a turn)"
            )

    def command(self) -> dict[str, Any]:
        """The WebSocket command that subscribes it (without its `id`)."""
        if self.event is not None:
            return {"type": "subscribe_events", "event_type": self.event}
        # `to: null` is HA's "a change of the state, not of an attribute alone"
        trigger = {"platform": "state", "entity_id": list(self.entities), "to": self.to}
        return {"type": "subscribe_trigger", "trigger": trigger}


@attrs.frozen
class HomeAssistantConfig(PlatformConfig):
    """Home Assistant's own settings, beside those every platform has (`base_url` is
    required: the server is yours)."""

    subscriptions: dict[str, Subscription] = attrs.field(
        factory=dict, validator=names_of("subscription")
    )
    """The subscriptions by name; each is a conversation of its own."""
    confirm: tuple[str, ...] = attrs.field(default=CONFIRMED, validator=_domains)
    """Domains whose services `ha_call_service` asks an owner about before it calls them
    (a service of any domain aimed at their entities, at `all`, or at an area, device,
    label or floor too); by default locks, alarms, covers and what can run anything:
    `scene`, `script`, `automation`, `button`, `homeassistant`, `hassio`,
    `shell_command`. `[]` asks about none (a call in a conversation that read untrusted
    text is asked all the same)."""
    idle_timeout: float = attrs.field(default=30.0, validator=positive)
    """Seconds its WebSocket may go without a frame or a pong before it is replaced."""
    max_prompt: int = attrs.field(default=8000, validator=at_least(100))
    """Characters an event's prompt may have once its fields are filled in; the rest is
    cut, saying so."""
    allow_all_users: bool = True
    """Every event of a subscription is let in: the token proves the server."""
    busy: Busy | None = "queue"
    """An event that comes while its subscription's turn runs waits for it."""
    merge_window: float | None = attrs.field(default=0.0, validator=optional_seconds)
    """Events are never merged: each is a turn of its own."""

    def answers_to(self) -> dict[str, str]:
        named = {}
        for name, subscription in self.subscriptions.items():
            if (platform := platform_of(subscription.deliver)) is not None:
                named[f"subscriptions.{name}.deliver"] = platform
        return named

    def named_owners(self) -> frozenset[str]:
        """The subscriptions whose events start owners' turns, and `owner`."""
        owners = {n for n, s in self.subscriptions.items() if s.role == "owner"}
        return super().named_owners() | owners
