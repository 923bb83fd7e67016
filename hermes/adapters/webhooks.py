"""The webhook listener: where platforms that push (WhatsApp) deliver, on a port of its
own, never the operator surfaces', so exposing webhooks never exposes the dashboard.

It serves `/webhooks/<platform>` (and what follows it, `/webhooks/<platform>/<rest>`:
the inbound webhooks' routes) for the enabled webhook platforms only, reads a body
only up to `gateway.webhooks.max_body`, and hands each request to that platform's
adapter as a call (`WebhookRequest`), answering what the adapter answered.
The adapter verifies and admits before it answers, so a 2xx means the delivery is in
the journal; an adapter that is down, or slower than WEBHOOK_TIMEOUT, is a 503, and
the platform delivers again. hypercorn's Trio worker serves it, as it serves ops.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

import attrs

from hermes.actors.actor import Actor
from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped, CallTimeout
from hermes.adapters.listening import headers_of, listen, not_http, read_body, respond

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT = 20.0  # seconds an adapter gets to admit a delivery (Meta waits ~30)
PREFIX = "/webhooks/"


@attrs.frozen
class WebhookRequest:
    """One request to a platform's webhook, for its adapter (a call, answered with a
    WebhookAnswer). `headers` lower-cased; `query` the first value of each name; `path`
    what follows `/webhooks/<platform>/` ("" for `/webhooks/<platform>` itself)."""

    method: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = attrs.field(repr=lambda b: f"<{len(b)} bytes>")
    path: str = ""


@attrs.frozen
class WebhookAnswer:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


NO_SUCH_WEBHOOK = WebhookAnswer(404, b"no such webhook\n")
UNAUTHORIZED = WebhookAnswer(401, b"unauthorized\n")  # no proof where one is asked
FORBIDDEN = WebhookAnswer(403, b"forbidden\n")  # a proof that does not hold


class WebhookListener(Actor):
    """`adapter_of(platform)`: the running adapter of a webhook platform, None while it is
    down; `on_bound(port)`: told the port it bound."""

    def __init__(
        self,
        host: str,
        port: int,
        platforms: frozenset[str],
        adapter_of: Callable[[str], Address | None],
        max_body: int,
        on_bound: Callable[[int], None],
    ) -> None:
        super().__init__("webhooks")
        self.host, self.port = host, port
        self.platforms = platforms
        self.adapter_of = adapter_of
        self.max_body = max_body
        self.on_bound = on_bound

    async def on_start(self) -> None:
        port = await listen(
            self.nursery,
            self._app,
            self.host,
            self.port,
            "gateway.webhooks.port",
            "hermes.webhooks.http",
        )
        self.on_bound(port)
        log.info(
            "webhooks on http://%s:%d%s{%s}",
            self.host,
            port,
            PREFIX,
            ",".join(sorted(self.platforms)),
        )

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if await not_http(scope, receive, send):
            return
        answer = await self._answer(scope, receive)
        await respond(send, answer.status, answer.body, answer.content_type)

    async def _answer(self, scope: dict[str, Any], receive: Any) -> WebhookAnswer:
        path: str = scope["path"]
        named = path[len(PREFIX) :] if path.startswith(PREFIX) else ""
        platform, _, rest = named.partition("/")
        if platform not in self.platforms:
            return NO_SUCH_WEBHOOK
        if scope["method"] not in ("GET", "POST"):
            return WebhookAnswer(405, b"GET or POST\n")
        headers = headers_of(scope)
        declared = headers.get("content-length", "0")
        if not declared.isdigit() or int(declared) > self.max_body:
            return WebhookAnswer(413, b"too large\n")
        body = await read_body(receive, self.max_body)
        if body is None:
            return WebhookAnswer(413, b"too large\n")
        query = dict(urllib.parse.parse_qsl(scope["query_string"].decode("latin-1")))
        adapter = self.adapter_of(platform)
        if adapter is None:
            return WebhookAnswer(503, b"not ready; deliver again\n")
        request = WebhookRequest(scope["method"], query, headers, body, rest)
        try:
            answer: WebhookAnswer = await adapter.call(request, timeout=WEBHOOK_TIMEOUT)
        except (ActorStopped, CallTimeout):
            return WebhookAnswer(503, b"not ready; deliver again\n")
        except Exception:  # a bug in the adapter: the platform delivers again
            log.exception("webhooks: %s failed on a delivery", platform)
            return WebhookAnswer(500, b"failed; deliver again\n")
        return answer
