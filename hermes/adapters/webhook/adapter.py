"""The inbound webhooks' adapter: each route's deliveries, proven by its secret, become
events whose answers go where the route says.

The webhook listener hands it each request to `/webhooks/<name>/<route>` (a call).
In this order, so that a forger costs a dictionary lookup and one HMAC:
- an unknown route is a 404, anything but a POST a 405;
- a missing or wrong signature (the HMAC-SHA256 of the raw body under the route's
  secret, compared in constant time) is a 401: nothing is admitted and the body is
  never logged (the refusals are counted and said at most once a minute per route);
- GitHub's `ping` (sent when a hook is made) is a 200 and no turn;
- a body that is not JSON is a 400;
- then the event (id: the route and the delivery's id, so a redelivery is recognised)
  is admitted to the journal, and only then answered 202 (200 for a delivery admitted
  before: its turn ran or will run, once). A delivery that could not be admitted is a
  500, and the sender delivers again.
Nothing to connect to: live from the start. Nothing is sent here: the answers go to the
chats the routes name, through their own platforms.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from typing import Any

import trio

from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import (
    NOWHERE,
    ChatType,
    InboundEvent,
    Permanent,
    SendRequest,
    SendResult,
)
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.signatures import HEX_PREFIX, signed
from hermes.adapters.template import Template
from hermes.adapters.webhook.config import WebhookConfig, WebhookRoute
from hermes.adapters.webhooks import NO_SUCH_WEBHOOK, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

REFUSALS_SAID_EVERY = 60.0  # seconds between log lines about one route's refused deliveries
UNSIGNED = WebhookAnswer(401, b"bad signature\n")


class WebhookAdapter(PlatformAdapter[WebhookConfig]):
    progress_deadline = math.inf  # it is pushed to: nothing it waits on can go deaf

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.templates = {
            name: Template.read(route.prompt or "") for name, route in self.config.routes.items()
        }
        self._refused: dict[str, tuple[float, int]] = {}  # route -> (last said, since)

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """Nothing to ask (doctor checked each route's secret is set): the routes."""
        config = cls.configured(config)
        if not config.routes:
            raise AdapterFatal("no routes: add one under platforms.webhook.routes")
        return "; ".join(
            f"{name} ({route.signature}, answers to {route.deliver})"
            for name, route in sorted(config.routes.items())
        )

    async def connect(self) -> None:
        missing = [n for n, r in self.config.routes.items() if not self.secrets.get(r.secret_env)]
        if missing:
            route = self.config.routes[missing[0]]
            raise AdapterFatal(f"platforms.{self.name}.routes.{missing[0]}: set {route.secret_env}")
        routes = ", ".join(sorted(self.config.routes)) or "none"
        log.info("%s: deliveries come to /webhooks/%s/<route> (%s)", self.name, self.name, routes)
        self.progress()
        await trio.sleep_forever()  # live until stopped: deliveries come to the listener

    async def send(self, request: SendRequest) -> SendResult:
        return Permanent(
            f"{self.name} is a way in, not a chat: a route's answers go where its `deliver` says"
        )

    # -- receiving --------------------------------------------------------------

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        name = request.path
        route = self.config.routes.get(name)
        if route is None:
            return NO_SUCH_WEBHOOK
        if request.method != "POST":
            return WebhookAnswer(405, b"POST\n")
        prefix = HEX_PREFIX if route.signature == "github" else ""
        secret = self.secrets.get(route.secret_env) or ""
        if not signed(request.body, request.headers.get(route.signature_header()), secret, prefix):
            self._said_refused(name)
            return UNSIGNED
        if route.signature == "github" and request.headers.get("x-github-event") == "ping":
            return WebhookAnswer(200, b"pong\n")
        try:
            payload = json.loads(request.body)
        except (ValueError, RecursionError):  # UnicodeDecodeError too; nesting too deep
            return WebhookAnswer(400, b"not JSON\n")
        event = self._event(name, route, request, payload)
        try:
            admitted = await self.admit(event)
        except Exception as exc:  # not in: the sender delivers again
            log.error("%s: delivery %s could not be admitted: %r", self.name, event.event_id, exc)
            return WebhookAnswer(500, b"not admitted; deliver again\n")
        self.progress()
        if not admitted:
            return WebhookAnswer(200, b"accepted before\n")
        log.info("%s: delivery %s admitted", self.name, event.event_id)
        return WebhookAnswer(202, b"accepted\n")

    def _event(
        self, name: str, route: WebhookRoute, request: WebhookRequest, payload: Any
    ) -> InboundEvent:
        """The delivery as an event of the route's conversation, answered where it says."""
        # Its id is its body's hash: the signature covers only the body, so a delivery id
        # in a header (GitHub's X-GitHub-Delivery) could be changed to replay it.
        delivery = hashlib.sha256(request.body).hexdigest()
        text = self.templates[name].render(payload, self.config.max_prompt)
        if text.lstrip().startswith("/"):  # a body's words are never a command
            text = f"[{name}] {text}"
        return InboundEvent(
            self.name,
            f"{name}:{delivery}",
            ChatType.DM,
            name,
            name,
            text,
            user_name=f"webhook route {name}",
            mentioned=True,
            answer_to=route.deliver or NOWHERE,
        )

    def _said_refused(self, name: str) -> None:
        """A refused delivery, said in the log at most once a minute per route (a forger
        fills no disk), never with its body."""
        now = trio.current_time()
        last, since = self._refused.get(name, (-math.inf, 0))
        if now - last < REFUSALS_SAID_EVERY:
            self._refused[name] = (last, since + 1)
            return
        self._refused[name] = (now, 0)
        more = f" (and {since} more since the last said)" if since else ""
        log.warning(
            "%s: a delivery to route %s without a valid signature was refused (401)%s",
            self.name,
            name,
            more,
        )
