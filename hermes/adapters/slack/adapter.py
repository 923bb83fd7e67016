"""The Slack adapter: our own Socket Mode client (trio-websocket) and Web API calls
(httpx); no Slack SDK.

- Start: `auth.test` with the bot token (the workspace, the bot's user id; a
  refused token is fatal), `apps.connections.open` with the app token for a
  single-use socket URL, then wait for `hello`.
- An envelope is admitted (committed to the journal) before it is acknowledged
  by its `envelope_id`; a retry of an event (same `event_id`) is recognised by
  admission and acknowledged again, never dropped before it was admitted.
- `disconnect` with `warning` or `refresh_requested`: the replacement socket is
  opened (and says hello) first, then takes over; the old one is still read
  until it closes, so no event falls between them. `link_disabled`: fatal.
- Liveness: every frame and every pong is progress; a ping goes out every
  third of the idle deadline; a half-open socket (no frames, no pongs) misses
  the deadline and the connection is replaced by the supervisor.
- Button presses (`interactive` envelopes of `block_actions`) are admitted as their
  button's command and acknowledged like every envelope; other interactions are
  acknowledged and skipped.
- Sends: `chat.postMessage` in the event's thread (a mention in a channel is
  answered in a thread under it), its buttons as Block Kit (blocks.py); 429's
  Retry-After goes to the outbox; permanent errors are dead letters; a request that
  may have arrived without an answer is Unconfirmed (never posted twice).
- Edits (`edit_of`): `chat.update` of that ts with the text and blocks built as for a
  send. `blocks` always goes, `[]` when there are no buttons: Slack keeps a message's
  old blocks when an update leaves them out, so a state without buttons would show
  the last state's. An identical update is ok; a message gone, not ours or past the
  workspace's edit window is Permanent(missing).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import httpx
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from hermes.adapters.base import AdapterFatal, AdapterSetup, ConnectionEnded, required
from hermes.adapters.contract import (
    Fetched,
    OutFile,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer, failed_send
from hermes.adapters.refusals import Codes
from hermes.adapters.slack.api import DEFAULT_BASE, SlackError, WebApi, refusal_of, web_api_url
from hermes.adapters.slack.blocks import with_buttons
from hermes.adapters.slack.config import SlackConfig
from hermes.adapters.slack.inbound import incoming
from hermes.adapters.slack.mrkdwn import escape
from hermes.adapters.url_media import fetch_urls, trusted
from hermes.config import Secrets

log = logging.getLogger(__name__)

RETIRE_AFTER = 30.0  # an old socket is closed by us this long after its replacement
MAX_FRAME = 4 * 1024 * 1024
FATAL_AUTH = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "missing_scope",
    "not_allowed_token_type",
}
CODES = Codes(
    rate_limited=frozenset({"ratelimited"}),
    auth=frozenset(FATAL_AUTH),
    passing=frozenset(
        {
            "internal_error",
            "fatal_error",
            "service_unavailable",
            "request_timeout",
            "invalid_response",
        }
    ),
    # chat.update's: the message is gone, is not the bot's, or is past the edit window
    gone=frozenset({"message_not_found", "cant_update_message", "edit_window_closed"}),
)
FILE_HOSTS = ("files.slack.com",)  # where url_private_download and upload URLs point


class SlackAdapter(HttpAdapter[SlackConfig]):
    platform = "slack"

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.bot_env, self.app_env = config.token_env, config.app_token_env
        self.bot_token = setup.secrets.get(config.token_env)
        self.app_token = setup.secrets.get(config.app_token_env)
        self.base = config.base_url or DEFAULT_BASE
        self.file_hosts = FILE_HOSTS + ((config.base_url,) if config.base_url else ())
        self.progress_deadline = config.idle_timeout
        self.bot_user = ""
        self.current: WebSocketConnection | None = None

    @classmethod
    async def check_token(cls, config: SlackConfig, secrets: Secrets) -> str:
        """`auth.test` with the bot token on the Web API client `connect()` uses; both
        tokens must be set, as at connect."""
        bot = required(secrets, config.token_env, "slack")
        required(secrets, config.app_token_env, "slack", "app_token_env")
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            try:
                auth = await WebApi(http, config.base_url or DEFAULT_BASE, bot).call("auth.test")
            except SlackError as exc:
                if exc.error in FATAL_AUTH:
                    raise AdapterFatal(f"Slack refused the token ({exc.error})") from None
                raise
        return f"{auth.get('user')} in {auth.get('team')} (user {auth.get('user_id')})"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.bot_token or ''}"}

    # -- receiving --------------------------------------------------------------

    async def connect(self) -> None:
        required(self.secrets, self.bot_env, self.platform)
        required(self.secrets, self.app_env, self.platform, "app_token_env")
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            auth = await self._fatal_on_auth(WebApi(http, self.base, self.bot_token), "auth.test")
            self.bot_user = str(auth.get("user_id") or "")
            self.progress()
            opener = WebApi(http, self.base, self.app_token)
            async with trio.open_nursery() as nursery:
                while True:  # one turn per socket: it serves until Slack asks to replace it
                    replace = trio.Event()
                    ws = await nursery.start(self._socket, opener, replace)
                    self.current = ws
                    nursery.start_soon(self._ping, ws)
                    await replace.wait()
                    log.info("%s: Slack asked for a new socket; opening it first", self.name)

    async def _fatal_on_auth(self, api: WebApi, method: str) -> dict[str, Any]:
        try:
            return await api.call(method)
        except SlackError as exc:
            if exc.error in FATAL_AUTH:
                raise AdapterFatal(f"Slack refused the token ({exc.error})") from None
            raise

    async def _socket(
        self, opener: WebApi, replace: trio.Event, task_status: trio.TaskStatus[Any]
    ) -> None:
        """Open a socket, wait for its hello, report it started, then read it until it
        closes: envelopes admitted then acknowledged, a disconnect request answered
        by `replace`. The current socket closing is the connection ending; a replaced
        one closing is expected."""
        opened = await self._fatal_on_auth(opener, "apps.connections.open")
        async with open_websocket_url(str(opened["url"]), max_message_size=MAX_FRAME) as ws:
            hello = json.loads(await ws.get_message())
            if hello.get("type") != "hello":
                raise ConnectionEnded(f"{self.name}: the socket began with {hello.get('type')!r}")
            self.progress()
            task_status.started(ws)
            with trio.CancelScope() as retire:  # a replaced socket is read a while longer
                try:
                    while True:
                        try:
                            frame = json.loads(await ws.get_message())
                        except ValueError:
                            continue  # not JSON: nothing Slack sends
                        self.progress()
                        self.settled()  # a frame past the hello: its end is no flap
                        await self._frame(ws, frame, replace)
                        if replace.is_set() and retire.deadline == math.inf:
                            retire.deadline = trio.current_time() + RETIRE_AFTER
                except ConnectionClosed:
                    pass
            if ws is self.current and not replace.is_set():
                raise ConnectionEnded(f"{self.name}: Slack closed the socket")

    async def _frame(
        self, ws: WebSocketConnection, frame: dict[str, Any], replace: trio.Event
    ) -> None:
        if frame.get("type") == "disconnect":
            if frame.get("reason") == "link_disabled":
                raise AdapterFatal("Slack turned Socket Mode off for the app (link_disabled)")
            replace.set()  # warning, refresh_requested: a new socket first
            return
        envelope_id = frame.get("envelope_id")
        if not envelope_id:
            return
        try:
            event = incoming(frame, self.bot_user, self.platform)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("%s: skipping a malformed envelope: %r", self.name, exc)
            event = None
        if event is not None:
            await self.admit(event)  # committed (or recognised as a repeat)...
        await ws.send_message(json.dumps({"envelope_id": envelope_id}))  # ...then the ack

    async def _ping(self, ws: WebSocketConnection) -> None:
        """A ping every third of the idle deadline: a live but quiet socket answers
        with a pong (progress); a half-open one does not, and misses the deadline."""
        every = self.progress_deadline / 3
        while ws is self.current:
            await trio.sleep(every)
            try:
                with trio.move_on_after(every):
                    await ws.ping()
                    self.progress()
                    self.settled()
            except ConnectionClosed:
                return

    # -- sending ------------------------------------------------------------------

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each file of an authorized message, from Slack's file host with the bot token
        (never followed to a sign-in page), streamed to the cache."""
        return await fetch_urls(
            attachments, self.cache, self.media, self.file_hosts, self.headers()
        )

    async def send(self, request: SendRequest) -> SendResult:
        if request.file is not None:
            return await self._send_file(request, request.file)
        target = request.target
        text = escape(request.text)  # `plain` or not: Slack refuses no formatting of ours
        params: dict[str, Any] = {"channel": target.chat_id, "text": text}
        blocks: list[dict[str, Any]] = []
        if request.buttons:
            blocks, left_off = with_buttons(text, request.buttons)
            for line in left_off:
                log.warning("%s: %s", self.name, line)
        if request.edit_of is not None:
            method = "chat.update"  # `[]` takes away the buttons an earlier state had
            params.update(ts=request.edit_of, blocks=blocks)
        else:
            method = "chat.postMessage"
            if blocks:
                params["blocks"] = blocks  # `text` stays: the notification's
            if target.thread_id:
                params["thread_ts"] = target.thread_id
            elif request.reply_to and not target.chat_id.startswith("D"):
                params["thread_ts"] = request.reply_to  # a mention is answered in its thread
        answer = await self.post(web_api_url(self.base, method), params)
        if not isinstance(answer, HttpAnswer):
            return answer
        return self._taken(answer, method, request.edit_of)

    async def _send_file(self, request: SendRequest, file: OutFile) -> SendResult:
        """Slack's external upload: an upload URL for the file's length, the bytes to it,
        then completeUploadExternal shares it in the chat. Only the last step shows
        anything, so a failure before it is sent again from the start, and only an
        answer lost in it is unknown."""
        asked = await self._form(
            "files.getUploadURLExternal", {"filename": file.name, "length": str(file.size)}
        )
        if not isinstance(asked, dict):
            return _not_shown(asked)
        url, file_id = asked.get("upload_url"), asked.get("file_id")
        if not isinstance(url, str) or not trusted(url, self.file_hosts) or not file_id:
            return RetryAfter(None, "files.getUploadURLExternal: no upload URL on Slack's host")
        sent = await self.upload(url, {}, {"file": file})
        if not isinstance(sent, HttpAnswer):
            return _not_shown(sent)
        if sent.status != 200:
            return RetryAfter(None, f"the upload answered HTTP {sent.status}")
        target = request.target
        params: dict[str, Any] = {
            "files": [{"id": file_id, "title": file.name}],
            "channel_id": target.chat_id,
        }
        if request.text:
            params["initial_comment"] = escape(request.text)
        if target.thread_id:
            params["thread_ts"] = target.thread_id
        elif request.reply_to and not target.chat_id.startswith("D"):
            params["thread_ts"] = request.reply_to
        answer = await self.post(web_api_url(self.base, "files.completeUploadExternal"), params)
        if not isinstance(answer, HttpAnswer):
            return answer
        result = self._taken(answer, "files.completeUploadExternal", None)
        return Sent(None) if isinstance(result, Sent) else result

    def _taken(self, answer: HttpAnswer, method: str, edit_of: str | None) -> SendResult:
        """Slack's answer to a send (or to chat.update of `edit_of`) as a send result."""
        refusal = refusal_of(answer, method)
        if refusal is not None:
            return self.refused(refusal, CODES, edit_of)
        if edit_of is not None:
            return Sent(edit_of)
        ts = answer.body.get("ts")
        return Sent(str(ts) if ts else None)

    async def _form(self, method: str, fields: dict[str, str]) -> dict[str, Any] | SendResult:
        """A Web API call with a form body (the upload methods take one): its answer's
        body when `ok`, else what it means for the send."""
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        try:
            response = await self.http.post(web_api_url(self.base, method), data=fields)
        except httpx.HTTPError as exc:
            return failed_send(exc)
        answer = HttpAnswer.of(response)
        if answer.status == 200 and isinstance(answer.body, dict) and answer.body.get("ok"):
            return answer.body
        return self._taken(answer, method, None)


def _not_shown(result: SendResult) -> SendResult:
    """A step before the share failed: nothing shows in the chat, so it may all go again."""
    if isinstance(result, Unconfirmed):
        return RetryAfter(None, result.reason)
    return result
