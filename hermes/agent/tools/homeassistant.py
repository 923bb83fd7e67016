"""The Home Assistant tools: read the home's states and history, call its services.

Offered where `platforms.homeassistant` is enabled (its Platform record names
`homeassistant_tools`), to the roles `agent.tools` grants them (owners, by default). They
speak HA's REST API with the section's long-lived access token (hermes's own client,
hermes/adapters/homeassistant/api.py): every answer is read up to a cap, and what the
model is shown is cut again (a count of entities, characters per value, the whole).

- `ha_states`: `GET /api/states`, filtered by domain, name (in the id or the friendly
  name) and area. An area's entities come from the template API (`POST /api/template`
  rendering `area_entities(...)`): one REST call with the same token, where the area,
  device and entity registries would take a WebSocket session per call. The area is
  passed as a JSON string literal, so it is a value in the template, never template code.
- `ha_call_service`: `POST /api/services/<domain>/<service>`. A service of a domain in
  `confirm` (locks, alarms, covers, and what can run anything: scenes, scripts,
  automations, buttons, `homeassistant`, `hassio`, `shell_command`, by default), one
  aimed at an entity of such a domain as HA reads the ids (split on commas, any case,
  `all`; a scene's `entities`), one aimed at an area, device, label or floor, and any
  call in a turn that read untrusted text, is asked of an owner first, as a guarded
  command is (a durable approval row, hermes.gateway.approvals): it runs only on a yes,
  never when denied, expired or cancelled.
- `ha_history`: `GET /api/history/period/<start>` for one entity, minimal, capped.

What HA answers is the devices' words (a name is whatever the device said): each call
marks the turn as having read untrusted text, as a web page does.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import attrs
import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.homeassistant.api import call, client
from hermes.adapters.homeassistant.config import DOMAIN, ENTITY, HomeAssistantConfig
from hermes.adapters.settings import PlatformConfig
from hermes.agent.tools.asking import approval
from hermes.agent.tools.base import Tool, ToolContext, ToolError, capped, need, obj
from hermes.config import Secrets

PLATFORM = "homeassistant"
MAX_ENTITIES = 50  # entities one ha_states answer lists
MAX_CHANGES = 200  # states one ha_history answer lists (the latest)
MAX_HOURS = 168
VALUE_CHARS = 200  # the longest a state or an attribute's value is shown
ATTRIBUTES = (
    "unit_of_measurement",
    "device_class",
    "brightness",
    "current_position",
    "temperature",
    "current_temperature",
)
AREA = re.compile(r"[^{}%#\\\n]{1,100}")
TARGETS = ("entity_id", "area_id", "device_id", "label_id", "floor_id")  # a call's `target`
GROUPS = TARGETS[1:]  # targets that stand for entities hermes cannot see from the call
SCENES = ("apply", "create")  # scene services whose `entities` are states they set
UNTRUSTED = "Home Assistant's answer (names its devices gave)"


def homeassistant_tools(section: PlatformConfig, secrets: Secrets) -> dict[str, Tool]:
    """The three tools on the server `section` names."""
    assert isinstance(section, HomeAssistantConfig)
    home = Home(section, secrets)
    tools: list[Tool] = [StatesTool(home), CallServiceTool(home), HistoryTool(home)]
    return {tool.name: tool for tool in tools}


@attrs.frozen
class Home:
    """The server the tools reach, and how."""

    config: HomeAssistantConfig
    secrets: Secrets

    async def call(self, ctx: ToolContext, method: str, path: str, **kwargs: Any) -> Any:
        """One REST call; its answer marks the turn. A refusal or a network failure is a
        ToolError saying so (never the token)."""
        try:
            async with client(self.config, self.secrets, PLATFORM) as http:
                answer = await call(http, method, path, **kwargs)
        except HermesError as exc:  # a refused token, an unset one, another refusal
            raise ToolError(str(getattr(exc, "reason", exc))) from None
        except httpx.HTTPError as exc:
            raise ToolError(f"Home Assistant did not answer: {type(exc).__name__}") from None
        ctx.took_in(UNTRUSTED)
        return answer


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > VALUE_CHARS:
        return value[:VALUE_CHARS] + "..."
    return (
        value
        if isinstance(value, str | int | float | bool) or value is None
        else _cut(json.dumps(value, ensure_ascii=False))
    )


def _entity(state: dict[str, Any]) -> dict[str, Any]:
    attributes = state.get("attributes") if isinstance(state.get("attributes"), dict) else {}
    shown = {"entity_id": _cut(state.get("entity_id")), "state": _cut(state.get("state"))}
    if attributes.get("friendly_name"):
        shown["name"] = _cut(attributes["friendly_name"])
    shown |= {key: _cut(attributes[key]) for key in ATTRIBUTES if key in attributes}
    return shown


@attrs.frozen
class StatesTool:
    home: Home
    name = "ha_states"
    description = (
        "List Home Assistant entities with their state, friendly name and a few attributes,"
        " filtered by domain (light, lock, cover, binary_sensor...), area (kitchen) and name"
        f" (a part of the id or the friendly name). At most {MAX_ENTITIES} are listed."
    )
    parameters = obj(
        [], domain={"type": "string"}, area={"type": "string"}, name={"type": "string"}
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        domain, area = args.get("domain") or None, args.get("area") or None
        name = str(args.get("name") or "").lower()
        if domain is not None and not DOMAIN.fullmatch(str(domain)):
            raise ToolError(f"{domain!r} is not a domain (light, lock, cover...)")
        in_area: set[str] | None = None
        if area is not None:
            if not isinstance(area, str) or not AREA.fullmatch(area):
                raise ToolError("area: an area's id or name, without braces or backslashes")
            template = "{{ area_entities(" + json.dumps(area) + ") | tojson }}"
            found = await self.home.call(ctx, "POST", "template", json={"template": template})
            listed = json.loads(found) if isinstance(found, str) and found.strip() else found
            in_area = {str(e) for e in listed} if isinstance(listed, list) else set()
        states = await self.home.call(ctx, "GET", "states")
        matching = [
            s
            for s in (states if isinstance(states, list) else [])
            if isinstance(s, dict)
            and isinstance(s.get("entity_id"), str)
            and (domain is None or s["entity_id"].split(".")[0] == domain)
            and (in_area is None or s["entity_id"] in in_area)
            and (not name or name in f"{s['entity_id']} {_friendly(s)}".lower())
        ]
        shown = [_entity(s) for s in matching[:MAX_ENTITIES]]
        answer: dict[str, Any] = {"count": len(matching), "entities": shown}
        if len(matching) > MAX_ENTITIES:
            answer["note"] = f"only the first {MAX_ENTITIES}: filter by domain, area or name"
        return capped(json.dumps(answer, ensure_ascii=False), ctx)


def _friendly(state: dict[str, Any]) -> str:
    attributes = state.get("attributes")
    return str(attributes.get("friendly_name") or "") if isinstance(attributes, dict) else ""


@attrs.frozen
class CallServiceTool:
    home: Home
    name = "ha_call_service"
    description = (
        "Call a Home Assistant service: domain and service (light, turn_on), target"
        ' ({"entity_id": "light.kitchen"}, or area_id, device_id, label_id, floor_id) and data'
        ' ({"brightness_pct": 50}). Locks, alarms, covers, scenes, scripts, automations and'
        " Home Assistant itself wait for an owner's approval, as does any call in a"
        " conversation that read untrusted text."
    )
    parameters = obj(
        ["domain", "service"],
        domain={"type": "string"},
        service={"type": "string"},
        target={"type": "object"},
        data={"type": "object"},
    )

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        domain, service = str(need(args, "domain")), str(need(args, "service"))
        if not DOMAIN.fullmatch(domain) or not DOMAIN.fullmatch(service):
            raise ToolError("domain and service: lower-case words (light, turn_on)")
        target, data = args.get("target") or {}, args.get("data") or {}
        if not isinstance(target, dict) or not isinstance(data, dict):
            raise ToolError("target and data: objects")
        body = {**data, **{k: target[k] for k in TARGETS if k in target}}
        shown = f"{domain}.{service} {json.dumps(body, ensure_ascii=False, sort_keys=True)}"
        reasons = _asked(self.home.config.confirm, domain, service, body) + _after_untrusted(ctx)
        refused = await approval(
            ctx, f"ha_call_service {shown}", reasons, self.home.config.base_url or ""
        )
        if refused is not None:
            return refused
        changed = await self.home.call(ctx, "POST", f"services/{domain}/{service}", json=body)
        states = changed if isinstance(changed, list) else []
        answer = {
            "called": f"{domain}.{service}",
            "changed": [_entity(s) for s in states[:MAX_ENTITIES] if isinstance(s, dict)],
        }
        return capped(json.dumps(answer, ensure_ascii=False), ctx)


def _ids(value: Any) -> list[str]:
    """Entity ids as Home Assistant reads them: a string split on commas, each stripped
    and lower-cased (`"light.porch, COVER.garage"` is two, one a cover)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [part.strip().lower() for item in items for part in str(item).split(",")]


def _asked(confirm: tuple[str, ...], domain: str, service: str, body: dict[str, Any]) -> list[str]:
    """Why the call needs an owner's yes by what it acts on (none: it does not)."""
    if domain in confirm:
        return [f"platforms.homeassistant.confirm names {domain}"]
    named = _ids(body.get("entity_id"))
    if domain == "scene" and service in SCENES:  # the states it sets are its keys
        entities = body.get("entities")
        named += _ids(list(entities) if isinstance(entities, dict | list) else [])
    everything = "all" in named
    domains = sorted({e.split(".")[0] for e in named} & set(confirm))
    if domains or (confirm and everything):
        return [
            f"it acts on {', '.join(domains) or 'every entity'} (platforms.homeassistant.confirm)"
        ]
    groups = [key for key in GROUPS if key in body]
    if confirm and groups:
        return [
            f"it acts on every entity of its {', '.join(groups)} (platforms.homeassistant.confirm)"
        ]
    return []


def _after_untrusted(ctx: ToolContext) -> list[str]:
    """Why any call needs an owner's yes in a turn that read untrusted text (as a command
    that would run unconfined is, unless `terminal.after_untrusted` is `host`)."""
    if ctx.untrusted is None or ctx.terminal.backends.config.after_untrusted == "host":
        return []
    return [f"this conversation holds untrusted text ({ctx.untrusted})"]


@attrs.frozen
class HistoryTool:
    home: Home
    name = "ha_history"
    description = (
        "The state history of one Home Assistant entity over the last hours (default 24,"
        f" at most {MAX_HOURS}): each change's state and time, the latest {MAX_CHANGES}."
    )
    parameters = obj(["entity_id"], entity_id={"type": "string"}, hours={"type": "number"})

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        entity = str(need(args, "entity_id"))
        if not ENTITY.fullmatch(entity):
            raise ToolError(f"{entity!r} is not an entity id (domain.object_id)")
        try:
            hours = float(args.get("hours") or 24)
        except (TypeError, ValueError):
            raise ToolError("hours: a number") from None
        hours = min(max(hours, 0.1), MAX_HOURS)
        start = ctx.clock.now() - hours * 3600
        at = datetime.datetime.fromtimestamp(start, datetime.UTC).isoformat()
        params = {"filter_entity_id": entity, "minimal_response": "", "no_attributes": ""}
        found = await self.home.call(ctx, "GET", f"history/period/{at}", params=params)
        changes = (
            found[0] if isinstance(found, list) and found and isinstance(found[0], list) else []
        )
        shown = [
            {"state": _cut(c.get("state")), "at": _cut(c.get("last_changed"))}
            for c in changes[-MAX_CHANGES:]
            if isinstance(c, dict)
        ]
        answer = {"entity_id": entity, "hours": hours, "count": len(changes), "changes": shown}
        return capped(json.dumps(answer, ensure_ascii=False), ctx)
