"""The Discord adapter: our own Gateway client (trio-websocket) and REST calls (httpx);
no Discord SDK.

- `GET /gateway/bot` (once per incarnation), then one socket per `connect()`:
  Hello, a heartbeat every interval (the first after a random fraction of it),
  then Resume of the session we have or Identify (guild messages, DMs, message
  content) and READY (the session, its resume URL, the bot's user).
- The session (id, resume URL, bot, sequence) is kept in state.db, so a new
  incarnation or a restart of hermes resumes it: Discord replays what was missed
  and admission recognises anything seen before. The sequence moves past a
  dispatch only once it is admitted: a resume never skips a message that was not
  committed.
- Hermes closes a socket only with 4000 (1000 and 1001 end the session). A socket
  that ends, however and whenever it ends (a close before Identify too), is an
  answer for the base, which connects again: at once after a socket that settled
  (a heartbeat acknowledged on a live session), after a growing jittered backoff
  otherwise, so a flapping gateway gets few IDENTIFYs.
- A heartbeat whose ACK has not come when the next is due, while the reader waits
  on the socket, means a zombie: closed and resumed. While the reader is busy
  (admitting), an unread ACK is no verdict. `op 7` resumes; `op 9` resumes, or
  identifies anew 1-5 s later (on the same socket when it refused our Resume, else
  on the next), reading and beating meanwhile; close codes 4004 and 4010-4014 are
  fatal, 4007 and 4009 start a new session, others resume.
- Liveness: ACKs and dispatches are progress; a connection without them for two
  heartbeat intervals and a margin is replaced.
- Button presses (INTERACTION_CREATE of type 3, which come whatever the intents) are
  admitted as their command, then acknowledged with `POST /interactions/{id}/{token}/
  callback` `{"type": 6}` (the message stays as it is), a duplicate too. Discord wants
  that within 3 s of the press, so it goes out from a task of its own at once, behind
  neither the reader nor the sends, without the bot's token (the interaction's token
  is the credential). A slash command (type 2; hermes registers none) is answered with
  a note, seen only by its sender, that hermes takes commands as messages.
- Sends: `POST /channels/{id}/messages` replying to the message, its buttons as one
  row of components (components.py). Every create and edit carries `allowed_mentions`
  with nothing to parse: no @everyone, @here, role or user in what the model wrote pings
  anyone; a reply keeps the platform's reply ping (`replied_user`) of the person it
  answers, as before, since the model did not write that one; 429's
  retry_after for the channel's bucket, or for everything when `global`; 5xx and
  a failed connection retry; every other 4xx is permanent (retrying 4xx earns an
  IP ban); a request that may have arrived without an answer is Unconfirmed.
- Edits (`edit_of`): `PATCH /channels/{id}/messages/{edit_of}` with the content and
  components built as for a send, `components: []` when there are none (the buttons of
  an earlier state go away), read by the same table: an identical edit is a 200 like
  any other; 10008 (Unknown Message: deleted, never there) and 50005 (another
  author's) are Permanent(missing). Its 429 is the channel's edit bucket, or global.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import httpx
import trio
from trio_websocket import ConnectionClosed, HandshakeError, open_websocket_url

from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    Fetched,
    InboundEvent,
    SendRequest,
    SendResult,
    Sent,
)
from hermes.adapters.discord.components import button_row
from hermes.adapters.discord.inbound import incoming, pressed
from hermes.adapters.discord.link import RESUMABLE_CLOSE, Link
from hermes.adapters.discord.session import KeptSession, Session
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer
from hermes.adapters.refusals import Codes, Refusal, retry_after
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.url_media import fetch_urls
from hermes.config import Secrets

log = logging.getLogger(__name__)

DEFAULT_BASE = "https://discord.com"
INTENTS = (1 << 9) | (1 << 12) | (1 << 15)  # guild messages, direct messages, content
FATAL_CLOSES = {
    4004: "authentication failed (4004)",
    4010: "invalid shard (4010)",
    4011: "sharding required (4011)",
    4012: "invalid API version (4012)",
    4013: "invalid intents (4013)",
    4014: "disallowed intents (4014): enable the message content intent for the bot",
}
NEW_SESSION_CLOSES = {4007, 4009}
MAX_FRAME = 4 * 1024 * 1024
HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = (
    1,
    2,
    6,
    7,
    9,
    10,
    11,
)
APPLICATION_COMMAND, MESSAGE_COMPONENT = 2, 3  # interaction types
DEFERRED_UPDATE_MESSAGE = {"type": 6}  # the press is taken; the message stays as it is
TEXT_COMMANDS_ONLY = {
    "type": 4,
    "data": {
        "flags": 1 << 6,  # ephemeral: its sender's only
        "content": "hermes takes commands as messages: type /help.",
        "allowed_mentions": {"parse": []},
    },
}
CALLBACK_DEADLINE = 10.0  # seconds; Discord refuses one after 3 s anyway
CALLBACKS_AT_ONCE = 64  # interactions being acknowledged; past that, one is left unanswered
# An edit's refusals for a message it cannot have: 10008 Unknown Message (deleted, never
# there), 50005 Cannot edit a message authored by another user.
CODES = Codes(gone=frozenset({"10008", "50005"}))
CDN_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")


class DiscordAdapter(HttpAdapter[PlatformConfig]):
    platform = "discord"
    typing_every = 8.0  # Discord shows typing for 10 s
    progress_deadline = 60.0  # until Hello says the interval

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.token_env = config.token_env
        self.token = setup.secrets.get(config.token_env)
        self.base = (config.base_url or DEFAULT_BASE).rstrip("/") + "/api/v10/"
        self.file_hosts = CDN_HOSTS + ((config.base_url,) if config.base_url else ())
        self.kept = KeptSession(setup.cursors, f"{setup.name}:session")
        self.gateway: str | None = None
        self.bot_id = ""
        self.identify_after = 0.0  # trio time: Discord asks for 1-5 s after an invalid session
        self.rng = random.Random()
        self.answering = 0  # interaction callbacks in flight (bounded: CALLBACKS_AT_ONCE)

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`GET users/@me` on a client built as `on_start()` builds it (the same base and
        `Bot` header); a 401 is a refusal, as at connect."""
        token = required(secrets, config.token_env, "discord")
        base = (config.base_url or DEFAULT_BASE).rstrip("/") + "/api/v10/"
        async with httpx.AsyncClient(timeout=TIMEOUT, headers=_auth(token)) as http:
            response = await http.get(base + "users/@me")
        _refused(response)
        me = response.json()
        return f"{me.get('username')} (id {me.get('id')})"

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        kept = await self.kept.load()
        if kept is not None:
            self.bot_id = kept.bot_id
        await super().on_start()

    def headers(self) -> dict[str, str]:
        return _auth(self.token or "")

    async def flush(self) -> None:
        await self.kept.keep()  # the last sequence admitted: a restart replays less
        await super().flush()

    # -- receiving --------------------------------------------------------------

    async def connect(self) -> str:
        """One socket: resume the session we have, else identify; why the socket ended."""
        required(self.secrets, self.token_env, self.platform)
        if self.gateway is None:
            response = await self.http.get(self.base + "gateway/bot")
            _refused(response)
            self.gateway = str(response.json()["url"])
        session = self.kept.current
        why = await self._socket(session.resume_url if session else self.gateway)
        await self.kept.keep()
        return why

    async def _socket(self, url: str) -> str:
        """One socket from Hello to its end, and why it ended; AdapterFatal for a close
        that refuses us for good. Hermes closes it with the resumable code (under
        cancellation the TCP connection just ends, resumable too)."""
        sep = "&" if "?" in url else "?"
        try:
            async with open_websocket_url(
                f"{url}{sep}v=10&encoding=json", max_message_size=MAX_FRAME
            ) as ws:
                link = Link(ws)
                try:
                    return await self._run(link)
                finally:
                    await link.close("the socket is done")
        except HandshakeError as exc:
            return f"could not open the gateway socket: {exc!r}"

    async def _run(self, link: Link) -> str:
        try:
            hello = await link.receive()
        except ConnectionClosed as closed:
            return await self._closed(link, closed)
        if hello.get("op") != HELLO:
            return f"the gateway began with op {hello.get('op')}"
        link.interval = float(hello["d"]["heartbeat_interval"]) / 1000
        self.progress_deadline = 2 * link.interval + 5.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._heartbeat, link)
            nursery.start_soon(self._introduce, link)
            why = await self._read(link, nursery)
            nursery.cancel_scope.cancel()
        return why

    async def _closed(self, link: Link, closed: ConnectionClosed) -> str:
        """How the socket ended, told as what happened."""
        if link.closed_by_us:
            return f"hermes closed the socket ({RESUMABLE_CLOSE}): {link.closed_by_us}"
        code = closed.reason.code if closed.reason else None
        if code in FATAL_CLOSES:
            await self.kept.forget()
            raise AdapterFatal(f"Discord closed the gateway: {FATAL_CLOSES[code]}")
        if code in NEW_SESSION_CLOSES:
            await self.kept.forget()
            return f"the gateway closed the socket ({code}): the session is over"
        return f"the gateway closed the socket ({code})"

    async def _introduce(self, link: Link) -> None:
        """Resume the session we have, else identify (not before `identify_after`; the
        socket is read and beats meanwhile)."""
        session = self.kept.current
        if session is not None:
            d = {"token": self.token, "session_id": session.id, "seq": session.seq}
            await link.send(RESUME, d)
            return
        await trio.sleep_until(self.identify_after)
        where = {"os": "linux", "browser": "hermes", "device": "hermes"}
        await link.send(IDENTIFY, {"token": self.token, "intents": INTENTS, "properties": where})

    def _seq(self) -> int | None:
        session = self.kept.current
        return None if session is None else session.seq

    async def _heartbeat(self, link: Link) -> None:
        """A beat every interval, the first after a random fraction of it, keeping the
        session's sequence in state.db at that pace. A beat due with the last one
        unanswered while the reader waits on the socket means a zombie: closed (with
        4000) and resumed. While the reader is busy, the ACK may wait unread: no
        verdict then."""
        due = trio.current_time() + link.interval * self.rng.random()
        while True:
            await trio.sleep_until(due)
            if not link.acked and link.reading:
                log.warning("%s: no heartbeat ACK; the connection is a zombie", self.name)
                await link.close("no heartbeat ACK: a zombie connection")
                return
            link.acked = False
            await link.send(HEARTBEAT, self._seq())
            await self.kept.keep()
            due += link.interval

    async def _read(self, link: Link, nursery: trio.Nursery) -> str:
        """Frames until the socket is done; why it is."""
        while True:
            try:
                frame = await link.receive()
            except ConnectionClosed as closed:
                return await self._closed(link, closed)
            op = frame.get("op")
            if op == HEARTBEAT_ACK:
                link.acked = True
                self.progress()
                if link.ready:
                    self.settled()
            elif op == HEARTBEAT:
                await link.send(HEARTBEAT, self._seq())
            elif op == RECONNECT:
                return "Discord asked for a reconnect (op 7)"
            elif op == INVALID_SESSION:
                if frame.get("d"):
                    return "Discord invalidated the session, resumable (op 9)"
                await self.kept.forget()
                self.identify_after = trio.current_time() + self.rng.uniform(1.0, 5.0)
                if link.ready:  # a live session ended: a new socket for a new one
                    return "Discord invalidated the session (op 9): identifying anew"
                log.info("%s: Discord refused the Resume (op 9); identifying", self.name)
                nursery.start_soon(self._introduce, link)
            elif op == 0:
                self.progress()
                await self._dispatch(frame, link)

    async def _dispatch(self, frame: dict[str, Any], link: Link) -> None:
        kind, data, seq = frame.get("t"), frame.get("d") or {}, frame.get("s")
        if kind == "READY":
            self.bot_id = str((data.get("user") or {}).get("id") or "")
            url = str(data.get("resume_gateway_url") or self.gateway)
            self.kept.current = Session(str(data.get("session_id")), url, self.bot_id)
        elif kind == "MESSAGE_CREATE":
            try:
                event = incoming(data, self.bot_id, self.platform)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipping a malformed message: %r", self.name, exc)
                event = None
            if event is not None:
                await self.admit(event)  # typing starts once it is admitted
        elif kind == "INTERACTION_CREATE":
            await self._interaction(data)
        session = self.kept.current
        if seq is not None and session is not None:  # only past what is admitted
            session.seq = int(seq)
        if kind in ("READY", "RESUMED"):
            link.ready = True
            await self.kept.keep()

    async def _interaction(self, interaction: dict[str, Any]) -> None:
        """A button press is admitted, then acknowledged (a duplicate too); a slash command
        is answered with a note; other interactions are skipped."""
        kind = interaction.get("type")
        if kind == MESSAGE_COMPONENT:
            try:
                event = pressed(interaction, self.platform)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.info("%s: a malformed button press: %r", self.name, exc)
                event = None
            if event is None:
                log.info(
                    "%s: acknowledging and skipping interaction %s: no command or chat",
                    self.name,
                    interaction.get("id"),
                )
            else:
                await self.admit(event)
            self._answer(interaction, DEFERRED_UPDATE_MESSAGE)
        elif kind == APPLICATION_COMMAND:
            self._answer(interaction, TEXT_COMMANDS_ONLY)
        else:
            log.debug(
                "%s: skipping interaction %s of type %s", self.name, interaction.get("id"), kind
            )

    def _answer(self, interaction: dict[str, Any], body: dict[str, Any]) -> None:
        """Answer the interaction from a task of its own in the actor's nursery: not
        behind the reader (which goes on with the next dispatch) nor the sends."""
        interaction_id, token = interaction.get("id"), interaction.get("token")
        if not interaction_id or not token or self.nursery is None:
            log.info("%s: interaction %s cannot be answered", self.name, interaction_id)
            return
        if self.answering >= CALLBACKS_AT_ONCE:  # a flood (a stranger's too) stays bounded
            log.warning(
                "%s: %d interactions are being acknowledged; %s is left unanswered",
                self.name,
                CALLBACKS_AT_ONCE,
                interaction_id,
            )
            return
        self.answering += 1
        self.nursery.start_soon(self._callback, str(interaction_id), str(token), body)

    async def _callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> None:
        """`POST interactions/{id}/{token}/callback`, without the bot's Authorization
        header (Discord authenticates it by the token in the path). A failure is
        logged: the press is admitted either way, only its spinner shows an error."""
        try:
            await self._post_callback(interaction_id, token, body)
        finally:
            self.answering -= 1

    async def _post_callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> None:
        if self.http is None:
            return
        headers = {k: v for k, v in self.http.headers.items() if k.lower() != "authorization"}
        url = f"{self.base}interactions/{interaction_id}/{token}/callback"
        request = httpx.Request("POST", url, json=body, headers=headers)
        response = None
        with trio.move_on_after(CALLBACK_DEADLINE):
            try:
                response = await self.http.send(request)
            except httpx.HTTPError as exc:
                log.warning(
                    "%s: acknowledging interaction %s failed: %r", self.name, interaction_id, exc
                )
                return
        if response is None:
            log.warning(
                "%s: no answer to acknowledging interaction %s within %g s",
                self.name,
                interaction_id,
                CALLBACK_DEADLINE,
            )
        elif response.status_code >= 400:
            answer = HttpAnswer.of(response).body
            code = answer.get("code") if isinstance(answer, dict) else None
            # 40060: acknowledged already (a replayed press); 10062: unknown or too late
            level = logging.INFO if code in (40060, 10062) else logging.WARNING
            log.log(
                level,
                "%s: acknowledging interaction %s: %s %s",
                self.name,
                interaction_id,
                response.status_code,
                answer,
            )

    # -- typing -------------------------------------------------------------------

    async def type_once(self, event: InboundEvent) -> None:
        await self.http.post(f"{self.base}channels/{event.chat_id}/typing")

    # -- sending ------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        """`POST channels/{id}/messages`, or `PATCH` of `request.edit_of` there: the same
        content and components, the answer read by the same table. `plain` changes
        nothing: Discord sends every text as written."""
        body: dict[str, Any] = {
            "content": request.text,
            "allowed_mentions": allowed_mentions(request.reply_to),
        }
        components, left_off = button_row(request.buttons)
        for line in left_off:
            log.warning("%s: %s", self.name, line)
        messages = f"{self.base}channels/{request.target.chat_id}/messages"
        if request.file is not None:
            if request.reply_to:
                body["message_reference"] = {
                    "message_id": request.reply_to,
                    "fail_if_not_exists": False,
                }
            body["attachments"] = [{"id": 0, "filename": request.file.name}]
            answer = await self.upload(
                messages, {"payload_json": json.dumps(body)}, {"files[0]": request.file}
            )
        elif request.edit_of is not None:
            body["components"] = components  # [] takes away an earlier state's buttons
            answer = await self.post(f"{messages}/{request.edit_of}", body, method="PATCH")
        else:
            if request.reply_to:
                body["message_reference"] = {
                    "message_id": request.reply_to,
                    "fail_if_not_exists": False,
                }
            if components:
                body["components"] = components
            answer = await self.post(messages, body)
        if not isinstance(answer, HttpAnswer):
            return answer  # the request failed on the way
        refusal = refusal_of(answer)
        if refusal is not None:
            return self.refused(refusal, CODES, request.edit_of)
        if request.edit_of is not None:
            return Sent(request.edit_of)
        message_id = answer.body.get("id") if isinstance(answer.body, dict) else None
        return Sent(str(message_id) if message_id else None)

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each attachment of an authorized message, from its signed CDN link (no token
        goes with it), streamed to the cache."""
        return await fetch_urls(attachments, self.cache, self.media, self.file_hosts)


def allowed_mentions(reply_to: str | None) -> dict[str, Any]:
    """Whom a message may ping: nobody its text names (the model's @everyone, `<@id>` or
    `<@&role>` stays text); a reply pings the author of the message it answers, as
    Discord's replies do (an edit says the same, so the reply keeps its mention)."""
    return {"parse": [], "replied_user": True} if reply_to else {"parse": []}


def refusal_of(answer: HttpAnswer) -> Refusal | None:
    """None when Discord took the send (200, 201), else what it said: its JSON error
    `code`, and a 429's wait (the body's `retry_after`, else the header) and whether it
    is the global limit."""
    if answer.status in (200, 201):
        return None
    body = answer.body if isinstance(answer.body, dict) else {}
    reason = f"{answer.status} {body.get('message') or 'no message'}"
    if answer.status != 429:
        return Refusal(answer.status, str(body.get("code") or ""), reason)
    is_global = answer.headers.get("x-ratelimit-global", "").lower() == "true"
    wait = retry_after(answer.headers, body.get("retry_after"))
    return Refusal(429, "", reason, wait, scope_wide=bool(body.get("global")) or is_global)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bot {token}"}


def _refused(response: httpx.Response) -> None:
    """A 401 is the token refused for good; any other failure passes as httpx's error."""
    if response.status_code == 401:
        raise AdapterFatal("Discord refused the token (401 Unauthorized)")
    response.raise_for_status()
