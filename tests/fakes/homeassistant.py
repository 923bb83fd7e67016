"""A fake Home Assistant (its REST API and its WebSocket API on one port), written from
HA's developer documentation (REST API, WebSocket API), for hermes's Home Assistant
adapter and tools.

- The home: ENTITIES, each with its area (kitchen, living_room, hall, garage): two
  lights, a lock, a cover and the garage door's binary sensor. `TOKEN` is the long-lived
  access token; every REST call needs it as a bearer (else 401 `{"message": ...}`).
- REST: `GET /api/` (`{"message": "API running."}`), `GET /api/states`, `POST
  /api/services/<domain>/<service>` (recorded in `calls`, applied to the states: a
  light's turn_on/turn_off/toggle, a lock's lock/unlock, a cover's open_cover/close_cover,
  `homeassistant.turn_on`/`turn_off`/`toggle` on any of them; every change one call
  makes shares its one context, as in HA; answered with the states it
  changed; an unknown service is a 400), `GET /api/history/period/<start>?
  filter_entity_id=` (every state the entity had since, `minimal_response` honoured),
  `POST /api/template` (only `{{ area_entities("<area>") | tojson }}`, which is what
  hermes sends; anything else is a 400).
- WebSocket `GET /api/websocket`: `auth_required`, then `auth` answered `auth_ok` or
  `auth_invalid` (and closed). Commands carry a rising `id` (a reused one is an error
  result `id_reuse`); `subscribe_events` (`event_type`, or every event) and
  `subscribe_trigger` (a `state` trigger: `entity_id`, `to`; `to: null` a change of the
  state only, `set_state` to the same state being an update of attributes) answered
  with a result, and recorded in `subscriptions`; `ping` answered `pong`; anything else
  `unknown_command`.
- A change of state is a `state_changed` event (`set_state`: in a new context, as a
  device's report; a service call: in the call's one context), pushed to every
  subscription it matches, recorded in `pushed`.
- `restart(changes)`: HA restarting. Every socket is cut, then each change happens while
  no socket is open: nobody hears of it, and a new socket is told nothing of it.
- `half_open()`: the newest socket goes silent both ways.
- `change_when_subscribed(count, entity, state)`: a change right after the `count`th
  subscription is answered, while the client sets up its next.

In its own process: `python -m tests.fakes.homeassistant` prints its URL and serves until
killed; `POST {url}/_fake/<control>` calls set_state, restart, half_open; `GET
{url}/_fake/state` answers the records.
"""

from __future__ import annotations

import datetime
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import attrs

from tests.fakes.kit import observed, serve_until_killed
from tests.fakes.local_http import (
    BodyError,
    Reply,
    TrackedHandler,
    bearer,
    decode_object,
    match,
    query,
    routes,
)
from tests.fakes.websocket import WebSocket, WebSocketFake

TOKEN = "ha-long-lived-token-0001"
VERSION = "2024.12.0"
ENTITIES = {  # entity id: (state, friendly name, area)
    "light.kitchen": ("off", "Kitchen Light", "kitchen"),
    "light.living_room": ("on", "Living Room Lamp", "living_room"),
    "lock.front_door": ("locked", "Front Door", "hall"),
    "cover.garage_door": ("closed", "Garage Door", "garage"),
    "binary_sensor.garage_door": ("off", "Garage Door Open", "garage"),
}
SERVICES = {  # (domain, service): the state it sets (None: toggles on/off)
    ("light", "turn_on"): "on",
    ("light", "turn_off"): "off",
    ("light", "toggle"): None,
    ("lock", "lock"): "locked",
    ("lock", "unlock"): "unlocked",
    ("cover", "open_cover"): "open",
    ("cover", "close_cover"): "closed",
    ("homeassistant", "turn_on"): "on",
    ("homeassistant", "turn_off"): "off",
    ("homeassistant", "toggle"): None,
}
AREA_TEMPLATE = re.compile(r'\{\{ area_entities\(("(?:[^"\\]|\\.)*")\) \| tojson \}\}')


@attrs.define(eq=False, kw_only=True)
class _Socket(WebSocket):
    authed: bool = False
    last_id: int = 0
    subscribed: dict[int, dict[str, Any]] = attrs.Factory(dict)  # id -> its command

    def info(self) -> dict[str, Any]:
        return {**super().info(), "authed": self.authed}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class FakeHomeAssistant(WebSocketFake):
    name = "Home Assistant"
    _socket_paths = frozenset({"/api/websocket"})
    _socket_class = _Socket
    _channel_field = "entity_id"
    _ROUTES = routes(
        ("GET", "/api", "_api_root"),
        ("GET", "/api/states", "_api_states"),
        ("POST", "/api/services/{domain}/{service}", "_api_service"),
        ("GET", "/api/history/period/{start}", "_api_history"),
        ("POST", "/api/template", "_api_template"),
    )
    _CONTROLS = frozenset({"set_state", "restart", "half_open"})
    _STATE = ("calls", "subscriptions", "pushed", "refused", "open_sockets", "sockets")

    def __init__(self, token: str = TOKEN) -> None:
        super().__init__()
        self.token = token
        self._states: dict[str, dict[str, Any]] = {}
        self._history: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []
        self._subscriptions: list[dict[str, Any]] = []
        self._pushed: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._when_subscribed: dict[int, list[tuple[str, str]]] = {}
        with self._cond:
            for entity, (state, friendly, area) in ENTITIES.items():
                self._set(entity, state, friendly=friendly, area=area)

    calls = observed("_calls", "Each service call: `domain`, `service`, `data` (the body).")
    subscriptions = observed(
        "_subscriptions", "Each subscription taken: `socket`, `id`, `command`."
    )
    pushed = observed("_pushed", "Each event pushed: `socket`, `id`, `context`, `entity_id`.")
    refused = observed("_refused", "Each REST call refused: `path`, `status`.")

    # -- what a test does ---------------------------------------------------------------

    def set_state(self, entity_id: str, state: str) -> str:
        """The entity's state changes (a device reported it): the change's context id."""
        with self._cond:
            return self._set(entity_id, state)

    def change_when_subscribed(self, count: int, entity_id: str, state: str) -> None:
        """The entity's state changes right after the `count`th subscription of the fake's
        life is answered (before the client's next command is)."""
        with self._cond:
            self._when_subscribed.setdefault(count, []).append((entity_id, state))

    def state_of(self, entity_id: str) -> str:
        with self._cond:
            return self._states[entity_id]["state"]

    def written(self, entity_id: str) -> str:
        """When the entity's state was last written (its `last_updated`)."""
        with self._cond:
            return self._states[entity_id]["last_updated"]

    def restart(self, changes: list[list[str]] | None = None) -> int:
        """HA restarts: every socket is cut, and `changes` ([entity, state] each) happen
        while it is down (nobody hears of them); how many sockets were cut."""
        with self._cond:
            live = [s for s in self._sockets if s.closed_at is None and not s.close_now]
            for sock in live:
                sock.close_now = sock.cut = True
                sock.authed = False
            for entity, state in changes or []:
                self._set(entity, state)
            self._cond.notify_all()
            return len(live)

    def half_open(self) -> None:
        """The newest socket goes silent both ways."""
        with self._cond:
            self._sockets[-1].half_open = True
            self._cond.notify_all()

    def wait_subscribed(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The subscriptions taken, once `count` were in the fake's life."""
        return self._wait_records("_subscriptions", count, timeout, f"{count} subscription(s)")

    def wait_pushed(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_pushed", count, timeout, f"{count} event(s) pushed")

    def wait_calls(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_calls", count, timeout, f"{count} service call(s)")

    # -- the home ---------------------------------------------------------------------------

    def _set(self, entity_id: str, state: str, context: dict | None = None, **first: str) -> str:
        """Set a state (the lock held) in `context` (None: a new one, as a device's report
        is; a service call's changes share its one): recorded in the history, pushed as
        state_changed."""
        old = self._states.get(entity_id)
        attributes = dict(old["attributes"]) if old else {"friendly_name": first["friendly"]}
        context = context or _context()
        now = _now()
        new = {"entity_id": entity_id, "state": state, "attributes": attributes,
               "last_changed": now, "last_updated": now, "context": context}  # fmt: skip
        if old is None:
            new["area"] = first["area"]
        else:
            new["area"] = old["area"]
        self._states[entity_id] = new
        self._history.append(new)
        if old is not None:
            self._push_change(entity_id, _public(old), _public(new), context)
        self._cond.notify_all()
        return context["id"]

    def _push_change(self, entity_id: str, old: dict, new: dict, context: dict) -> None:
        data = {"entity_id": entity_id, "old_state": old, "new_state": new}
        event = {"event_type": "state_changed", "data": data, "origin": "LOCAL",
                 "time_fired": new["last_changed"], "context": context}  # fmt: skip
        for sock in self._sockets:
            if not sock.authed or sock.closed_at is not None or sock.close_now:
                continue
            for command_id, command in sock.subscribed.items():
                body = self._matching(command, event, entity_id, old, new, context)
                if body is None:
                    continue
                frame = {"id": command_id, "type": "event", "event": body}
                sock.outbox.append((json.dumps(frame), None))
                self._pushed.append({"socket": sock.id, "id": command_id,
                                     "context": context["id"], "entity_id": entity_id})  # fmt: skip

    def _matching(self, command: dict, event: dict, entity_id: str, old: dict, new: dict,
                  context: dict) -> dict[str, Any] | None:  # fmt: skip
        """What `command`'s subscriber is sent of the change (None: nothing)."""
        if command["type"] == "subscribe_events":
            wanted = command.get("event_type")
            return event if wanted in (None, "state_changed") else None
        trigger = command["trigger"]
        entities = trigger["entity_id"]
        entities = [entities] if isinstance(entities, str) else entities
        if entity_id not in entities:
            return None
        if "to" in trigger and trigger["to"] not in (None, new["state"]):
            return None
        if "to" in trigger and trigger["to"] is None and old["state"] == new["state"]:
            return None  # `to: null`: a change of the state, not of attributes alone
        fired = {"id": "0", "idx": "0", "alias": None, "platform": "state",
                 "entity_id": entity_id, "from_state": old, "to_state": new, "for": None,
                 "attribute": None, "description": f"state of {entity_id}"}  # fmt: skip
        return {"variables": {"trigger": fired}, "context": context}

    # -- the socket ---------------------------------------------------------------------------

    def _ws_refusal(self, status: int, why: str) -> Reply:
        return Reply(status, {"message": why})

    def _ws_opened(self, sock: _Socket) -> None:
        sock.outbox.append((json.dumps({"type": "auth_required", "ha_version": VERSION}), None))

    def _on_frame(self, sock: _Socket, frame: Any, now: float) -> None:
        if not isinstance(frame, dict):
            return
        if not sock.authed:
            if frame.get("type") == "auth" and frame.get("access_token") == self.token:
                sock.authed = True
                sock.outbox.append((json.dumps({"type": "auth_ok", "ha_version": VERSION}), None))
            else:
                said = {"type": "auth_invalid", "message": "Invalid access token or password"}
                sock.outbox.append((json.dumps(said), None))
                sock.close_now = True
            return
        command_id, kind = frame.get("id"), frame.get("type")
        if not isinstance(command_id, int) or command_id <= sock.last_id:
            self._result(
                sock, command_id, error=("id_reuse", "Identifier values have to increase.")
            )
            return
        sock.last_id = command_id
        if kind == "ping":
            sock.outbox.append((json.dumps({"id": command_id, "type": "pong"}), None))
        elif kind == "subscribe_events" or (
            kind == "subscribe_trigger" and _state_trigger(frame.get("trigger"))
        ):
            command = {k: v for k, v in frame.items() if k != "id"}
            sock.subscribed[command_id] = command
            self._subscriptions.append({"socket": sock.id, "id": command_id, "command": command})
            self._result(sock, command_id)
            for entity, state in self._when_subscribed.pop(len(self._subscriptions), []):
                self._set(entity, state)
        elif kind == "subscribe_trigger":
            self._result(sock, command_id, error=("invalid_format", "expected a state trigger"))
        else:
            self._result(sock, command_id, error=("unknown_command", "Unknown command."))

    def _result(self, sock: _Socket, command_id: Any, error: tuple[str, str] | None = None) -> None:
        frame: dict[str, Any] = {"id": command_id, "type": "result", "success": error is None}
        if error is None:
            frame["result"] = None
        else:
            frame["error"] = {"code": error[0], "message": error[1]}
        sock.outbox.append((json.dumps(frame), None))

    # -- the REST API ------------------------------------------------------------------------

    def _internal_error(self) -> Reply:
        return Reply(500, {"message": "Internal Server Error"})

    def _no_route(self, request: TrackedHandler, status: int) -> Reply:
        return Reply(status, {"message": "Not Found" if status == 404 else "Method Not Allowed"})

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        path = urlsplit(request.path).path.rstrip("/") or "/"
        found = match(self._ROUTES, request.command, path)
        if isinstance(found, int):
            return self._no_route(request, found)
        handler, params = found
        with self._cond:
            if bearer(request.headers) != self.token:
                return self._refuse(path, 401, "Unauthorized")
            return getattr(self, handler)(request, raw, **params)

    def _refuse(self, path: str, status: int, message: str) -> Reply:
        self._refused.append({"path": path, "status": status})
        self._cond.notify_all()
        return Reply(status, {"message": message})

    def _api_root(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, {"message": "API running."})

    def _api_states(self, request: TrackedHandler, raw: bytes) -> Reply:
        return Reply(200, [_public(s) for s in self._states.values()])

    def _api_service(self, request: TrackedHandler, raw: bytes, domain: str, service: str) -> Reply:
        try:
            data = decode_object(request.headers.get("content-type", ""), raw) if raw else {}
        except BodyError as exc:
            return self._refuse(request.path, 400, str(exc))
        if (domain, service) not in SERVICES:
            return self._refuse(request.path, 400, f"Service {domain}.{service} not found.")
        ids = data.get("entity_id") or []
        ids = [ids] if isinstance(ids, str) else list(ids)
        if "area_id" in data:
            ids += [e for e, s in self._states.items() if s["area"] == data["area_id"]]
        self._calls.append({"domain": domain, "service": service, "data": data,
                            "at": time.monotonic()})  # fmt: skip
        changed, context = [], _context()  # one context for every change the call makes
        for entity in ids:
            if entity not in self._states or (domain != "homeassistant" and
                                              not entity.startswith(domain + ".")):  # fmt: skip
                continue
            state = SERVICES[(domain, service)]
            if state is None:
                state = "off" if self._states[entity]["state"] == "on" else "on"
            if state != self._states[entity]["state"]:
                self._set(entity, state, context)
                changed.append(_public(self._states[entity]))
        self._cond.notify_all()
        return Reply(200, changed)

    def _api_history(self, request: TrackedHandler, raw: bytes, start: str) -> Reply:
        params = query(request.path)
        entity = params.get("filter_entity_id")
        if not entity:
            return self._refuse(request.path, 400, "filter_entity_id is missing")
        try:
            since = datetime.datetime.fromisoformat(start)
        except ValueError:
            return self._refuse(request.path, 400, "Invalid datetime")
        found = [s for s in self._history if s["entity_id"] == entity
                 and datetime.datetime.fromisoformat(s["last_changed"]) >= since]  # fmt: skip
        minimal = "minimal_response" in urlsplit(request.path).query
        shown = [_public(s) for s in found]
        if minimal:
            shown = shown[:1] + [{"state": s["state"], "last_changed": s["last_changed"]}
                                 for s in shown[1:]]  # fmt: skip
        return Reply(200, [shown] if shown else [])

    def _api_template(self, request: TrackedHandler, raw: bytes) -> Reply:
        try:
            body = decode_object(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            return self._refuse(request.path, 400, str(exc))
        found = AREA_TEMPLATE.fullmatch(str(body.get("template") or ""))
        if found is None:
            return self._refuse(request.path, 400, "Error rendering template")
        area = json.loads(found.group(1))
        entities = [e for e, s in self._states.items() if s["area"] == area]
        return Reply(200, json.dumps(entities).encode(), content_type="text/plain; charset=utf-8")


def _context() -> dict[str, Any]:
    return {"id": uuid.uuid4().hex.upper()[:26], "parent_id": None, "user_id": None}


def _public(state: dict[str, Any]) -> dict[str, Any]:
    """A state as the API shows it (its area is the registry's, not the state's)."""
    return {k: v for k, v in state.items() if k != "area"}


def _state_trigger(trigger: Any) -> bool:
    return (isinstance(trigger, dict) and trigger.get("platform") == "state"
            and bool(trigger.get("entity_id")))  # fmt: skip


def main() -> None:
    serve_until_killed(FakeHomeAssistant())


if __name__ == "__main__":
    main()
