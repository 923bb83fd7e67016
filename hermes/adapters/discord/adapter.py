"""The Discord adapter: our own Gateway client (trio-websocket) and REST calls (httpx);
no Discord SDK.

- `GET /gateway/bot`, then Hello, a heartbeat every interval (the first after a
  random fraction of it), Identify (guild messages, DMs, message content) and
  READY (the session, its resume URL, the bot's user).
- A heartbeat whose ACK has not come when the next is due means a zombie
  connection: it is closed with a code other than 1000 and the session resumed
  at its resume URL from the last sequence; Discord replays what was missed
  (admission recognises anything seen before). `op 7` resumes; `op 9` resumes
  or identifies anew after 1-5 s; close codes 4004 and 4010-4014 are fatal,
  4007 and 4009 start a new session, others resume.
- The sequence moves past a dispatch only once it is admitted: a resume never
  skips a message that was not committed.
- Liveness: ACKs and dispatches are progress; a connection without them for two
  heartbeat intervals and a margin is replaced.
- Sends: `POST /channels/{id}/messages` replying to the message; 429's
  retry_after for the channel's bucket, or for everything when `global`; 5xx and
  a failed connection retry; every other 4xx is permanent (retrying 4xx earns an
  IP ban); a request that may have arrived without an answer is Unconfirmed.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import httpx
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from hermes.adapters.base import AdapterFatal, AdapterSetup, PlatformAdapter
from hermes.adapters.contract import (
    InboundEvent,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.discord.inbound import incoming
from hermes.adapters.http_errors import failed_send
from hermes.config import PlatformConfig, Secrets

log = logging.getLogger(__name__)

DEFAULT_BASE = "https://discord.com"
INTENTS = (1 << 9) | (1 << 12) | (1 << 15)  # guild messages, direct messages, content
FATAL_CLOSES = {4004: "authentication failed (4004)", 4010: "invalid shard (4010)",
                4011: "sharding required (4011)", 4012: "invalid API version (4012)",
                4013: "invalid intents (4013)", 4014: "disallowed intents (4014): enable"
                " the message content intent for the bot"}  # fmt: skip
NEW_SESSION_CLOSES = {4007, 4009}
ZOMBIE_CLOSE = 4000
HTTP_TIMEOUT = 30.0
MAX_FRAME = 4 * 1024 * 1024


class _Reconnect(Exception):
    """The socket is done; connect again (resume unless the session was dropped)."""


class DiscordAdapter(PlatformAdapter):
    platform = "discord"
    typing_every = 8.0  # Discord shows typing for 10 s
    progress_deadline = 60.0  # until Hello says the interval

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup.name, setup.status, setup.admit)
        config = setup.config
        self.platform = setup.name
        self.token_env = config.token_env
        self.token = setup.secrets.get(config.token_env) if config.token_env else None
        self.base = (config.base_url or DEFAULT_BASE).rstrip("/") + "/api/v10/"
        self.http: httpx.AsyncClient | None = None  # for sends, opened in on_start
        self.bot_id = ""
        self.session: str | None = None
        self.resume_url: str | None = None
        self.seq: int | None = None
        self.rng = random.Random()

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`GET users/@me` on a client built as `on_start()` builds it (the same base and
        `Bot` header); a 401 is a refusal, as at connect."""
        token = secrets.get(config.token_env) if config.token_env else None
        if not token:
            raise AdapterFatal(f"no token: set {config.token_env or 'platforms.discord.token_env'}")
        base = (config.base_url or DEFAULT_BASE).rstrip("/") + "/api/v10/"
        auth = {"Authorization": f"Bot {token}"}
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT, headers=auth) as http:
            response = await http.get(base + "users/@me")
        if response.status_code == 401:
            raise AdapterFatal("Discord refused the token (401 Unauthorized)")
        response.raise_for_status()
        me = response.json()
        return f"{me.get('username')} (id {me.get('id')})"

    async def on_start(self) -> None:
        auth = {"Authorization": f"Bot {self.token or ''}"}
        client = httpx.AsyncClient(timeout=HTTP_TIMEOUT, headers=auth)
        self.http = await self.exits.enter_async_context(client)
        await super().on_start()

    # -- receiving --------------------------------------------------------------

    async def connect(self) -> None:
        if not self.token:
            raise AdapterFatal(f"no token: set {self.token_env or 'platforms.discord.token_env'}")
        response = await self.http.get(self.base + "gateway/bot")
        if response.status_code == 401:
            raise AdapterFatal("Discord refused the token (401 Unauthorized)")
        response.raise_for_status()
        gateway = str(response.json()["url"])
        self.progress()
        while True:
            url = self.resume_url if self.session and self.resume_url else gateway
            try:
                await self._socket(url)
            except _Reconnect as why:
                log.info("%s: %s; connecting again", self.name, why)
            await trio.sleep(self.rng.uniform(0.1, 1.0))

    async def _socket(self, url: str) -> None:
        """One socket, from Hello to its end: raises _Reconnect (resume, or a new
        session) or AdapterFatal."""
        sep = "&" if "?" in url else "?"
        async with open_websocket_url(f"{url}{sep}v=10&encoding=json",
                                      max_message_size=MAX_FRAME) as ws:  # fmt: skip
            try:
                hello = json.loads(await ws.get_message())
            except ConnectionClosed as closed:
                self._closed(closed)
            if hello.get("op") != 10:
                raise _Reconnect(f"the gateway began with op {hello.get('op')}")
            interval = float(hello["d"]["heartbeat_interval"]) / 1000
            self.progress_deadline = 2 * interval + 5.0
            self.progress()
            await self._introduce(ws)
            async with trio.open_nursery() as nursery:
                acked = [True]
                nursery.start_soon(self._heartbeat, ws, interval, acked)
                why = await self._read(ws, acked)
                nursery.cancel_scope.cancel()
        if isinstance(why, ConnectionClosed):
            self._closed(why)
        raise _Reconnect(why)

    def _closed(self, closed: ConnectionClosed) -> None:
        code = closed.reason.code if closed.reason else None
        if code in FATAL_CLOSES:
            raise AdapterFatal(f"Discord closed the gateway: {FATAL_CLOSES[code]}")
        if code in NEW_SESSION_CLOSES:
            self.session = None
        raise _Reconnect(f"the gateway closed ({code})")

    async def _introduce(self, ws: WebSocketConnection) -> None:
        if self.session:
            d = {"token": self.token, "session_id": self.session, "seq": self.seq}
            await ws.send_message(json.dumps({"op": 6, "d": d}))
        else:
            where = {"os": "linux", "browser": "hermes", "device": "hermes"}
            d = {"token": self.token, "intents": INTENTS, "properties": where}
            await ws.send_message(json.dumps({"op": 2, "d": d}))

    async def _heartbeat(self, ws: WebSocketConnection, interval: float, acked: list[bool]) -> None:
        """A beat every interval, the first after a random fraction of it; a beat due
        with the last one unanswered means a zombie: closed (not 1000) and resumed."""
        await trio.sleep(interval * self.rng.random())
        try:
            while True:
                if not acked[0]:
                    log.warning("%s: no heartbeat ACK; the connection is a zombie", self.name)
                    await ws.aclose(code=ZOMBIE_CLOSE, reason="zombie")
                    return
                acked[0] = False
                await ws.send_message(json.dumps({"op": 1, "d": self.seq}))
                await trio.sleep(interval)
        except ConnectionClosed:
            return  # the reader says how it ended

    async def _read(self, ws: WebSocketConnection, acked: list[bool]) -> str | ConnectionClosed:
        """Frames until the socket is done; why it is (a reason to reconnect, or how it
        closed)."""
        while True:
            try:
                frame = json.loads(await ws.get_message())
            except ConnectionClosed as closed:
                return closed
            op = frame.get("op")
            if op == 11:
                acked[0] = True
                self.progress()
            elif op == 1:
                await ws.send_message(json.dumps({"op": 1, "d": self.seq}))
            elif op == 7:
                return "Discord asked for a reconnect (op 7)"
            elif op == 9:
                if not frame.get("d"):
                    self.session = None
                    await trio.sleep(self.rng.uniform(1.0, 5.0))
                return "Discord invalidated the session (op 9)"
            elif op == 0:
                self.progress()
                await self._dispatch(frame)

    async def _dispatch(self, frame: dict[str, Any]) -> None:
        kind, data = frame.get("t"), frame.get("d") or {}
        if kind == "READY":
            self.session = data.get("session_id")
            self.resume_url = data.get("resume_gateway_url")
            self.bot_id = str((data.get("user") or {}).get("id") or "")
        elif kind == "MESSAGE_CREATE":
            try:
                event = incoming(data, self.bot_id, self.platform)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipping a malformed message: %r", self.name, exc)
                event = None
            if event is not None:
                await self.admit(event)  # typing starts once it is admitted
        if frame.get("s") is not None:  # only past what is admitted: a resume skips nothing
            self.seq = int(frame["s"])

    # -- typing -------------------------------------------------------------------

    async def type_once(self, event: InboundEvent) -> None:
        await self.http.post(f"{self.base}channels/{event.chat_id}/typing")

    # -- sending ------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        body: dict[str, Any] = {"content": request.text}
        if request.reply_to:
            body["message_reference"] = {"message_id": request.reply_to,
                                         "fail_if_not_exists": False}  # fmt: skip
        url = f"{self.base}channels/{request.target.chat_id}/messages"
        try:
            response = await self.http.post(url, json=body)
        except httpx.HTTPError as exc:
            return failed_send(exc)
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if not isinstance(answer, dict):
            answer = {}
        status = response.status_code
        reason = f"{status} {answer.get('message') or response.reason_phrase}"
        if status in (200, 201):
            message_id = answer.get("id")
            return Sent(str(message_id)) if message_id else Unconfirmed(f"{status} without an id")
        if status == 429:
            wait = float(answer.get("retry_after") or response.headers.get("retry-after") or 1)
            scope_wide = (
                bool(answer.get("global"))
                or response.headers.get("x-ratelimit-global", "").lower() == "true"
            )
            return RetryAfter(wait, reason, scope_wide=scope_wide)
        if status >= 500:
            return RetryAfter(None, reason)
        return Permanent(reason)  # every other 4xx: never retried
