"""Home Assistant's REST and WebSocket APIs as hermes speaks them: our own client (httpx,
trio-websocket), no Home Assistant library.

REST: `{base}/api/...` with `Authorization: Bearer <long-lived access token>`; a refused
token is a 401 (or 403), with no body worth reading. The token travels in a header (and
in the WebSocket's `auth` message) only, never in a URL or an error message. Answers are
read up to MAX_BODY: a home with thousands of entities still costs a bounded read.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.base import AdapterFatal, required
from hermes.adapters.homeassistant.config import HomeAssistantConfig
from hermes.config import Secrets

TIMEOUT = httpx.Timeout(20.0, connect=10.0)
MAX_BODY = 4 * 1024 * 1024


class HomeAssistantError(HermesError):
    """Home Assistant answered something else than what was asked for: the status and
    what it said, in one line."""


def server(config: HomeAssistantConfig, platform: str) -> str:
    """The server's base URL; AdapterFatal naming the setting when it is unset."""
    if not config.base_url:
        raise AdapterFatal(f"no server: set platforms.{platform}.base_url")
    return config.base_url.rstrip("/")


def socket_url(base: str) -> str:
    """The WebSocket API on the same server (ws:// for http://, wss:// for https://)."""
    return "ws" + base.rstrip("/").removeprefix("http") + "/api/websocket"


def client(config: HomeAssistantConfig, secrets: Secrets, platform: str) -> httpx.AsyncClient:
    """A client of the REST API with the token; AdapterFatal when it or the server is unset."""
    token = required(secrets, config.token_env, platform)
    base = server(config, platform)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=TIMEOUT, trust_env=False)


async def call(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """One REST call's JSON (or text) answer; AdapterFatal for a refused token,
    HomeAssistantError for another refusal or an answer too long. httpx's errors pass."""
    async with http.stream(method, "/api/" + path.lstrip("/"), **kwargs) as response:
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > MAX_BODY:
                raise HomeAssistantError(f"{method} {path}: the answer is over {MAX_BODY} bytes")
    status = response.status_code
    said = bytes(body[:200]).decode("utf-8", "replace").strip()
    if status in (401, 403):
        raise AdapterFatal(f"Home Assistant refused the token (HTTP {status})")
    if not 200 <= status < 300:
        raise HomeAssistantError(f"{method} {path.split('?')[0]}: HTTP {status} {said}".strip())
    try:
        return json.loads(body) if body else None
    except ValueError:
        return bytes(body).decode("utf-8", "replace")
