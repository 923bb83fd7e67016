"""The Home Assistant adapter: a client of its WebSocket API whose subscriptions' events
become turns, answered where each subscription says (a way in, as an inbound webhook is).

- Start: `GET {base}/api/websocket`; the server says `auth_required`, we answer `auth`
  with the long-lived access token; `auth_ok` goes on, `auth_invalid` is fatal (the
  refused token, and what the server said, in the status). Then one command per
  subscription, each with the next `id`: `subscribe_trigger` (a state trigger for its
  entities, `to`) or `subscribe_events` (its event type, filtered here to its entities);
  a subscription the server refuses is fatal, naming it and why. Events of those
  already live that come while the next is set up are kept and handled after.
- Events: `{"id": N, "type": "event", "event": {...}}`, N the subscription's command.
  Each becomes an event of the subscription's own conversation (chat and user: its
  name), its prompt rendered from the event (a trigger's `variables`, or the event
  itself), its id the subscription's name, HA's `context.id` of the change, the entity
  and its state's `last_updated` (one call's changes share a context: each is a turn):
  admitted once, whichever way it comes again.
- Liveness: a `ping` every third of `idle_timeout`, each `pong` (and every frame) is
  progress; a half-open socket misses the deadline and is replaced.
- HA restarting closes the socket: the base connects again, and this connection
  authenticates and subscribes anew. Nothing is read back from the states: a change
  that happened while the socket was down is not made into an event.
- Sends: none. Answers go to the chats the subscriptions name, through their platforms.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter, required
from hermes.adapters.contract import (
    NOWHERE,
    ChatType,
    InboundEvent,
    Permanent,
    SendRequest,
    SendResult,
)
from hermes.adapters.homeassistant.api import call, client, server, socket_url
from hermes.adapters.homeassistant.config import HomeAssistantConfig, Subscription
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.template import Template
from hermes.config import Secrets

log = logging.getLogger(__name__)

MAX_FRAME = 4 * 1024 * 1024


class HomeAssistantAdapter(PlatformAdapter[HomeAssistantConfig]):
    platform = "homeassistant"

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.progress_deadline = self.config.idle_timeout
        self.templates = {
            name: Template.read(s.prompt or "") for name, s in self.config.subscriptions.items()
        }

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`GET /api/` with the token: the server's "API running." and where it is."""
        config = cls.configured(config)
        async with client(config, secrets, cls.platform) as http:
            said = await call(http, "GET", "")
        message = said.get("message") if isinstance(said, dict) else None
        return f"{message or 'answered'} ({server(config, cls.platform)})"

    async def send(self, request: SendRequest) -> SendResult:
        return Permanent(
            f"{self.name} is a way in, not a chat: a subscription's answers go where its"
            " `deliver` says"
        )

    # -- receiving --------------------------------------------------------------------

    async def connect(self) -> str:
        token = required(self.secrets, self.config.token_env, self.platform)
        url = socket_url(server(self.config, self.platform))
        async with open_websocket_url(url, max_message_size=MAX_FRAME) as ws:
            try:
                await self._authenticate(ws, token)
                ids = itertools.count(1)
                subscribed, early = await self._subscribe(ws, ids)
            except ConnectionClosed:
                return f"{self.name}: Home Assistant closed the socket before it subscribed"
            for frame in early:
                await self._handle(frame, subscribed)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._ping, ws, ids)
                why = await self._read(ws, subscribed)
                nursery.cancel_scope.cancel()
        return why

    async def _authenticate(self, ws: WebSocketConnection, token: str) -> None:
        frame = await _frame(ws)
        if frame.get("type") != "auth_required":
            raise AdapterFatal(f"not Home Assistant's WebSocket API (it said {_kind(frame)})")
        await ws.send_message(json.dumps({"type": "auth", "access_token": token}))
        frame = await _frame(ws)
        if frame.get("type") == "auth_invalid":
            said = str(frame.get("message") or "")[:200]
            raise AdapterFatal(f"Home Assistant refused the token ({said or 'auth_invalid'})")
        if frame.get("type") != "auth_ok":
            raise AdapterFatal(f"Home Assistant answered the token with {_kind(frame)}")
        self.progress()
        log.info("%s: authenticated (Home Assistant %s)", self.name, frame.get("ha_version"))

    async def _subscribe(
        self, ws: WebSocketConnection, ids: itertools.count[int]
    ) -> tuple[dict[int, str], list[dict[str, Any]]]:
        """Each subscription's command, its result awaited: the subscriptions by id, and
        the events of those already live that came meanwhile (handled after, in order)."""
        subscribed: dict[int, str] = {}
        early: list[dict[str, Any]] = []
        for name, subscription in self.config.subscriptions.items():
            command_id = next(ids)
            await ws.send_message(json.dumps({"id": command_id, **subscription.command()}))
            while True:
                frame = await _frame(ws)
                if frame.get("id") == command_id and frame.get("type") == "result":
                    break
                if frame.get("type") == "event" and frame.get("id") in subscribed:
                    early.append(frame)
            if not frame.get("success"):
                error = frame.get("error") if isinstance(frame.get("error"), dict) else {}
                said = f"{error.get('code')}: {str(error.get('message'))[:200]}"
                raise AdapterFatal(f"subscriptions.{name}: Home Assistant refused it ({said})")
            subscribed[command_id] = name
            self.progress()
        log.info("%s: subscribed to %s", self.name, ", ".join(self.config.subscriptions) or "none")
        return subscribed, early

    async def _read(self, ws: WebSocketConnection, subscribed: dict[int, str]) -> str:
        """Events admitted until the socket closes: why."""
        while True:
            try:
                frame = await _frame(ws)
            except ConnectionClosed:
                return f"{self.name}: Home Assistant closed the socket"
            self.progress()
            if frame.get("type") == "pong":
                self.settled()
            await self._handle(frame, subscribed)

    async def _handle(self, frame: dict[str, Any], subscribed: dict[int, str]) -> None:
        """A frame that is an event of a subscription admitted (anything else skipped)."""
        if frame.get("type") == "event" and frame.get("id") in subscribed:
            self.settled()
            name = subscribed[frame["id"]]
            event = frame.get("event")
            if isinstance(event, dict):
                await self._event(name, self.config.subscriptions[name], event)

    async def _event(self, name: str, subscription: Subscription, event: dict[str, Any]) -> None:
        """One event of a subscription admitted (one about none of its entities skipped)."""
        if subscription.event is not None:
            body: Any = event
            entity = (event.get("data") or {}).get("entity_id") if _is_dict(event, "data") else None
            if subscription.entities and entity not in subscription.entities:
                return
        else:
            body = event.get("variables")
        context = _context_id(event, body)
        if context is None:
            log.warning("%s: an event of %s without a context id was skipped", self.name, name)
            return
        state = _path(body, "trigger", "to_state") or _path(body, "data", "new_state")
        entity = _path(body, "trigger", "entity_id") or _path(body, "data", "entity_id")
        written = _path(state, "last_updated") or event.get("time_fired")
        text = self.templates[name].render(body, self.config.max_prompt)
        if text.lstrip().startswith("/"):  # a device's words are never a command
            text = f"[{name}] {text}"
        admitted = await self.admit(
            InboundEvent(
                self.name,
                change_id(name, context, entity, written),
                ChatType.DM,
                name,
                name,
                text,
                user_name=f"Home Assistant subscription {name}",
                mentioned=True,
                answer_to=subscription.deliver or NOWHERE,
            )
        )
        if admitted:
            log.info("%s: an event of %s admitted (context %s)", self.name, name, context)

    async def _ping(self, ws: WebSocketConnection, ids: itertools.count[int]) -> None:
        """A `ping` every third of the idle deadline: a live socket answers `pong`."""
        every = self.progress_deadline / 3 if math.isfinite(self.progress_deadline) else 10.0
        while True:
            await trio.sleep(every)
            try:
                await ws.send_message(json.dumps({"id": next(ids), "type": "ping"}))
            except ConnectionClosed:
                return


async def _frame(ws: WebSocketConnection) -> dict[str, Any]:
    """The next message that is a JSON object (anything else is skipped)."""
    while True:
        try:
            frame = json.loads(await ws.get_message())
        except ValueError:
            continue
        if isinstance(frame, dict):
            return frame


def _kind(frame: dict[str, Any]) -> str:
    return repr(str(frame.get("type"))[:50])


def _is_dict(value: Any, key: str) -> bool:
    return isinstance(value, dict) and isinstance(value.get(key), dict)


def _context_id(event: dict[str, Any], body: Any) -> str | None:
    """HA's id of the change: the event's context, else the new state's."""
    for holder in (event, _path(body, "trigger", "to_state"), _path(body, "data", "new_state")):
        if _is_dict(holder, "context") and isinstance(holder["context"].get("id"), str):
            return holder["context"]["id"][:100]
    return None


def change_id(name: str, context: str, entity: Any, written: Any) -> str:
    """An event's id: the subscription, HA's context of the change, the entity and when
    its state was written. One service call, scene or script is one context for every
    entity it changes: each change is a turn, and the same change coming again is not."""
    return f"{name}:{context}:{str(entity or '-')[:255]}:{str(written or '-')[:64]}"


def _path(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value
