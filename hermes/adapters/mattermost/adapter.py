"""The Mattermost adapter: our own client of API v4 (httpx) and its WebSocket
(trio-websocket); no Mattermost driver.

- Start: `GET /users/me` with the bot's token (its id and username; a refused token is
  fatal), the WebSocket opened and authenticated (`authentication_challenge`), then the
  catch-up: the WebSocket replays nothing it missed, so each of the bot's channels with
  a post since its start (`last_post_at`) is read (history.py), and its posts created
  since then are admitted in order. A channel's start is a margin before its last
  admitted post, committed with that admission (a Cursor per channel), so a restart
  catches up from it too. A channel first seen starts when it was first seen: at the
  very first start, a margin before the server's time then; one found in a later
  listing (a new DM), a margin before the listing before; one the bot is added to
  (`user_added`), the server's time then, no margin (what was said there before is
  not for the bot). The channel list is
  read at every connection. A channel the server will not read this time (a 403, a
  404, a 5xx) is skipped with a warning, its start kept: the next catch-up tries it.
  Times are capped at the server's (its answers' Date): a post dated in the future
  does not carry a start past posts made after it.
- Events: `posted` is admitted (inbound.py); a post that comes by the socket and by the
  catch-up both is admitted once: the journal knows its id, and a post this connection's
  adapter admitted within the margin is not handed to it again. Each event's `seq` rises
  by one: a gap means events were missed, and the connection is ended, to catch up.
- Liveness: every frame and every pong is progress; a ping goes out every third of the
  idle deadline; a half-open socket misses the deadline and is replaced.
- Sends: `POST /posts` (a mention in a channel is answered in a thread under it), edits
  `PUT /posts/{id}/patch`; files `POST /files` then a post with their ids. Buttons are
  a message attachment's actions posting back to the webhook listener
  (`/webhooks/<name>/actions`, buttons.py), only where `actions_url` says how Mattermost
  reaches it. A 429 waits X-Ratelimit-Reset; a 401 is fatal, its rows kept.
- Presses: admitted as their command when their token is ours, answered `{}` (the post
  stays), else 403 before anything is read into the gateway.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import OrderedDict
from typing import Any

import httpx
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from hermes.actors.clock import Clock
from hermes.actors.link import FATAL
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    ChatType,
    Cursor,
    Fetched,
    InboundEvent,
    OutFile,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer
from hermes.adapters.mattermost.api import (
    CODES,
    MattermostError,
    api_url,
    get,
    refusal_of,
    server_ms,
    socket_url,
)
from hermes.adapters.mattermost.buttons import attachment
from hermes.adapters.mattermost.config import MattermostConfig
from hermes.adapters.mattermost.history import SINCE_CAP, posts_since
from hermes.adapters.mattermost.inbound import (
    CHAT_TYPES,
    action_key,
    post_event,
    press_event,
    socket_post,
)
from hermes.adapters.mattermost.markdown import escape
from hermes.adapters.refusals import Refusal
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.url_media import fetch_urls
from hermes.adapters.webhooks import FORBIDDEN, NO_SUCH_WEBHOOK, WebhookAnswer, WebhookRequest
from hermes.config import Secrets

log = logging.getLogger(__name__)

MAX_FRAME = 4 * 1024 * 1024
DAY_MS = 86_400_000
# The catch-up starts this long before the last admitted post: `create_at` is the time a
# server node took the post, not when it was committed, so a post of the same millisecond
# or one taken a little earlier by another node (or another request) and committed later
# would fall before the cursor. Posts in the margin come again; the journal admits each
# id once.
CATCH_UP_MARGIN_MS = 60_000
MAX_RECENT = 10_000  # ids of admitted posts kept to leave out of a catch-up
ACTIONS = "actions"  # the listener's path for presses: /webhooks/<name>/actions


class MattermostAdapter(HttpAdapter[MattermostConfig]):
    platform = "mattermost"
    typing_every = 4.0  # Mattermost shows "typing" for about 5 s after each

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        self.token = setup.secrets.get(self.config.token_env) or ""
        self.base = (self.config.base_url or "").rstrip("/")
        self.progress_deadline = self.config.idle_timeout
        self.key = action_key(self.token)
        self.bot = {"id": "", "username": ""}
        self.since_prefix = f"{setup.name}:since:"  # + a channel's id: where it starts
        self.listed_key = f"{setup.name}:listed"  # the server's time at the last listing
        self.starts: dict[str, int] | None = None  # channel id -> its catch-up's start (ms)
        self.listed: int | None = None
        self.offset_ms = 0  # the server's clock less ours, by its last Date header
        self.since_cap = SINCE_CAP  # the server's cap of a `posts?since=` answer
        self.recent: OrderedDict[str, int] = OrderedDict()  # admitted within the margin
        self.journal_days = setup.journal_days
        self.clock = setup.cursors.clock if setup.cursors is not None else Clock()
        self.kinds: dict[str, str] = {}  # channel id -> its type (D, G, O, P)
        self.ws: WebSocketConnection | None = None
        self._seq = itertools.count(2)  # our actions' seq; 1 is the authentication

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`GET /users/me` with the bot's token, as `connect()` starts."""
        config = cls.configured(config)
        token = required(secrets, config.token_env, cls.platform)
        base = _server(config, cls.platform)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
            me, _ = await _me(http, base)
        return f"@{me.get('username')} (user {me.get('id')}) on {base}"

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        await super().on_start()

    # -- receiving --------------------------------------------------------------------

    async def connect(self) -> str:
        required(self.secrets, self.config.token_env, self.platform)
        _server(self.config, self.platform)
        assert self.http is not None  # opened by on_start
        me, said = await _me(self.http, self.base)
        self._server_said(said)
        self.bot = {"id": str(me.get("id") or ""), "username": str(me.get("username") or "")}
        self._alive()
        await self._load_starts()
        async with open_websocket_url(socket_url(self.base), max_message_size=MAX_FRAME) as ws:
            challenge = {
                "seq": 1,
                "action": "authentication_challenge",
                "data": {"token": self.token},
            }
            try:
                await ws.send_message(json.dumps(challenge))
                last = await self._authenticated(ws)
            except ConnectionClosed:
                return f"{self.name}: Mattermost closed the socket before it was authenticated"
            self.ws = ws
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._ping, ws)
                    await self._catch_up()
                    why = await self._read(ws, last)
                    nursery.cancel_scope.cancel()
            finally:
                self.ws = None
        return why

    async def _load_starts(self) -> None:
        """Each channel's start and the last listing's time, as state.db keeps them (read
        once an incarnation; then kept here as they are committed)."""
        if self.starts is not None:
            return
        kept = await self.cursors.prefixed(self.since_prefix) if self.cursors else {}
        self.starts = {channel: int(float(value)) for channel, value in kept.items()}
        listed = await self.cursors.get(self.listed_key) if self.cursors else None
        self.listed = int(float(listed)) if listed is not None else None

    def _server_said(self, said: int | None) -> None:
        if said is not None:
            self.offset_ms = said - int(self.clock.now() * 1000)

    def _server_now(self) -> int:
        """The server's time (ms), by our clock and its last Date: no later than its own
        (a Date is to the second, rounded down)."""
        return int(self.clock.now() * 1000) + self.offset_ms

    async def _authenticated(self, ws: WebSocketConnection) -> int | None:
        """Until the challenge is answered: the seq of the last event seen meanwhile (the
        `hello`); AdapterFatal when the token is refused."""
        last = None
        while True:
            frame = json.loads(await ws.get_message())
            if frame.get("seq_reply") == 1:
                if frame.get("status") != "OK":
                    error = (frame.get("error") or {}).get("id") or "refused"
                    raise AdapterFatal(f"Mattermost refused the token ({error})")
                self._alive()
                return last
            if isinstance(frame.get("seq"), int):
                last = frame["seq"]

    async def _read(self, ws: WebSocketConnection, last: int | None) -> str:
        """Events admitted until the connection must end: why."""
        while True:
            try:
                frame = json.loads(await ws.get_message())
            except ValueError:
                continue  # not JSON: nothing Mattermost sends
            except ConnectionClosed:
                return f"{self.name}: Mattermost closed the socket"
            self._alive()
            seq = frame.get("seq")
            if not isinstance(seq, int):
                continue  # a reply to one of our actions
            self.settled()
            if last is not None and seq != last + 1:  # this one too comes by the catch-up,
                # which starts from the last admitted post: before what was missed
                return f"{self.name}: events were missed (seq {last} to {seq})"
            last = seq
            if frame.get("event") == "posted":
                await self._posted(frame.get("data") or {})
            elif frame.get("event") == "user_added" and self._me_added(frame):
                await self._joined((frame.get("broadcast") or {}).get("channel_id"))
                return f"{self.name}: added to a channel; reading it"

    def _alive(self) -> None:
        """Progress, unless a send found the token refused meanwhile (the status keeps
        saying why)."""
        if self.status.state != FATAL:
            self.progress()

    def _me_added(self, frame: dict[str, Any]) -> bool:
        return (frame.get("data") or {}).get("user_id") == self.bot["id"]

    async def _joined(self, channel: Any) -> None:
        """A channel the bot was added to starts now: what was said there before it came
        is not for it (a channel it left and joined again, neither)."""
        if not isinstance(channel, str) or not channel or self.starts is None:
            return
        self.starts[channel] = now = self._server_now()
        if self.cursors is not None:
            await self.cursors.put(self.since_prefix + channel, str(now))

    async def _posted(self, data: dict[str, Any]) -> None:
        try:
            post, kind, mentions, team = socket_post(data)
            self.kinds[str(post["channel_id"])] = kind
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("%s: skipping a malformed posted event: %r", self.name, exc)
            return
        await self._take(post, kind, mentions, team)

    async def _take(
        self, post: dict[str, Any], kind: str, mentions: tuple[str, ...] = (), team: str = ""
    ) -> None:
        """Admit a post, its channel's start committed with it; skipped: what is no event,
        and a post admitted within the margin already (the catch-up brings those again)."""
        if str(post.get("id")) in self.recent:
            return
        try:
            event = post_event(post, kind, self.bot, self.base, self.platform, mentions, team)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("%s: skipping a malformed post: %r", self.name, exc)
            return
        created = post.get("create_at")
        if event is None or not isinstance(created, int):
            return
        now = self._server_now()
        taken = min(created, now)  # a post dated in the future moves no start past now
        start, key = taken - CATCH_UP_MARGIN_MS, self.since_prefix + event.chat_id
        await self.admit(event, Cursor(key, str(start), rising=True) if self.cursors else None)
        if self.starts is not None:
            self.starts[event.chat_id] = max(self.starts.get(event.chat_id, start), start)
        self.recent[event.event_id] = taken
        horizon = now - 2 * CATCH_UP_MARGIN_MS
        while self.recent and (
            next(iter(self.recent.values())) < horizon or len(self.recent) > MAX_RECENT
        ):
            self.recent.popitem(last=False)

    async def _catch_up(self) -> None:
        """Every post of the bot's channels created since each one's start (not before
        the journal's days), oldest first.

        A post the socket brings meanwhile waits in its buffer until this ends, and one
        of a channel read here may be newer than that channel's answer; but a channel's
        start only rises to (a margin before) a post of its own answer, so it never
        passes a post of its channel that was not read: a catch-up as long as it takes,
        or a crash before the socket is read, loses none."""
        assert self.starts is not None
        now = self._server_now()
        oldest = now - int(self.journal_days * DAY_MS)
        channels = await self._channels()
        # a channel new since the last listing (a DM begun meanwhile) starts a margin
        # before it; at the very first start, a margin before now
        first = (now if self.listed is None else self.listed) - CATCH_UP_MARGIN_MS
        new = {c: first for c in channels if c not in self.starts}
        self.starts.update(new)
        self.listed = now  # taken before the listing: a channel made during it comes again
        if self.cursors is not None:
            kept = {self.since_prefix + c: str(start) for c, start in new.items()}
            await self.cursors.put_many({self.listed_key: str(now), **kept})
        posts: list[tuple[int, str, dict[str, Any], str, str]] = []
        for channel_id, channel in channels.items():
            since = max(self.starts[channel_id], oldest)
            if int(channel.get("last_post_at") or 0) < since:
                continue
            try:
                found = await posts_since(self._get, channel_id, since, self.since_cap)
            except MattermostError as exc:  # its start stays: the next catch-up tries it
                log.warning("%s: channel %s skipped this time: %s", self.name, channel_id, exc)
                continue
            kind, team = str(channel.get("type") or ""), str(channel.get("team_id") or "")
            for post in found:  # what this adapter admitted within the margin is left out
                if str(post.get("id")) not in self.recent:
                    posts.append((post["create_at"], str(post.get("id")), post, kind, team))
        if posts:
            log.info("%s: catching up %d post(s)", self.name, len(posts))
        for _, _, post, kind, team in sorted(posts, key=lambda p: p[:2]):
            await self._take(post, kind, (), team)

    async def _channels(self) -> dict[str, dict[str, Any]]:
        """The bot's channels in all its teams (DMs and group DMs come with each), by id."""
        seen: dict[str, dict[str, Any]] = {}
        for team in await self._get("users/me/teams") or []:
            for channel in await self._get(f"users/me/teams/{team['id']}/channels") or []:
                seen[str(channel["id"])] = channel
                self.kinds[str(channel["id"])] = str(channel.get("type") or "")
        return seen

    async def _get(self, path: str, **params: Any) -> Any:
        """A GET of the catch-up (its body; its Date read): a 429 waits as told, then asks
        again; a 401 is fatal; anything else refused is a MattermostError."""
        assert self.http is not None
        while True:
            try:
                answer = await get(self.http, self.base, path, **params)
            except MattermostError as exc:
                refusal = exc.refusal
                if refusal.status == 429:
                    await self.wait_as_told(refusal.retry_after or 1.0, refusal.reason)
                    continue
                if refusal.status == 401:
                    raise AdapterFatal(f"Mattermost refused the token ({refusal.code})") from None
                raise
            self._server_said(server_ms(answer.headers))
            self._alive()
            return answer.body

    async def _ping(self, ws: WebSocketConnection) -> None:
        """A ping every third of the idle deadline: a live but quiet socket answers with a
        pong (progress); a half-open one does not, and misses the deadline."""
        every = self.progress_deadline / 3
        while True:
            await trio.sleep(every)
            try:
                with trio.move_on_after(every):
                    await ws.ping()
                    self._alive()
            except ConnectionClosed:
                return

    async def type_once(self, event: InboundEvent) -> None:
        ws = self.ws
        if ws is not None:
            data = {"channel_id": event.chat_id, "parent_id": event.thread_id or ""}
            action = {"seq": next(self._seq), "action": "user_typing", "data": data}
            await ws.send_message(json.dumps(action))

    async def webhook(self, request: WebhookRequest) -> WebhookAnswer:
        if request.path != ACTIONS or request.method != "POST":
            return NO_SUCH_WEBHOOK
        try:
            payload = json.loads(request.body)
        except ValueError:
            payload = None
        event = press_event(payload, self.key, self.platform)
        if event is None:
            log.warning("%s: a button press without our token was refused", self.name)
            return FORBIDDEN
        try:
            await self.admit(event)
        except Exception as exc:  # not in: the user presses again
            log.error("%s: a press could not be admitted: %r", self.name, exc)
            return WebhookAnswer(500, b"not admitted; press again\n")
        return WebhookAnswer(200, b"{}", "application/json")

    # -- sending --------------------------------------------------------------------------

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """Each file of an authorized post, from the server's `/files/{id}` with the bot's
        token (the server only), streamed to the cache."""
        return await fetch_urls(attachments, self.cache, self.media, (self.base,), self.headers())

    async def send(self, request: SendRequest) -> SendResult:
        target = request.target
        root = target.thread_id or ""
        kind = CHAT_TYPES.get(self.kinds.get(target.chat_id, ""), ChatType.CHANNEL)
        if not root and request.reply_to and kind is not ChatType.DM:
            root = request.reply_to  # a mention in a channel is answered in its thread
        props: dict[str, Any] = {}
        if request.buttons and self.config.actions_url:
            url = self.config.actions_url
            attachments, left_off = attachment(
                request.buttons, url, self.key, target.chat_id, root, kind.value
            )
            for line in left_off:
                log.warning("%s: %s", self.name, line)
            props["attachments"] = attachments
        text = escape(request.text)
        if request.edit_of is not None:
            body = {"message": text, "props": props}  # no attachments: the buttons go
            url = api_url(self.base, f"posts/{request.edit_of}/patch")
            answer = await self.post(url, body, method="PUT")
            return self._taken(answer, "PUT posts/patch", request.edit_of)
        post: dict[str, Any] = {"channel_id": target.chat_id, "message": text, "root_id": root}
        if props:
            post["props"] = props
        if request.file is not None:
            uploaded = await self._upload(target.chat_id, request.file)
            if isinstance(uploaded, str):
                post["file_ids"] = [uploaded]
            else:
                return uploaded
        answer = await self.post(api_url(self.base, "posts"), post)
        return self._taken(answer, "POST posts", None)

    async def _upload(self, channel: str, file: OutFile) -> str | SendResult:
        """The file's id once uploaded; an upload shows nothing in the chat, so any failure
        of it lets the whole send go again."""
        answer = await self.upload(
            api_url(self.base, "files"), {"channel_id": channel}, {"files": file}
        )
        if isinstance(answer, HttpAnswer):
            refusal = refusal_of(answer, "POST files")
            infos = answer.body.get("file_infos") if isinstance(answer.body, dict) else None
            if refusal is not None:
                answer = self.refused(refusal, CODES)
            elif infos and isinstance(infos[0], dict) and infos[0].get("id"):
                return str(infos[0]["id"])
            else:
                return RetryAfter(None, "POST files: no file id")
        return RetryAfter(None, answer.reason) if isinstance(answer, Unconfirmed) else answer

    def _taken(self, answer: HttpAnswer | SendResult, what: str, edit_of: str | None) -> SendResult:
        if not isinstance(answer, HttpAnswer):
            return answer
        refusal = refusal_of(answer, what)
        if refusal is not None:
            return self.refused(refusal, CODES, edit_of)
        if edit_of is not None:
            return Sent(edit_of)
        post_id = answer.body.get("id") if isinstance(answer.body, dict) else None
        return (
            Sent(str(post_id)) if post_id else Unconfirmed(f"{what}: {answer.status} without an id")
        )


def _server(config: MattermostConfig, platform: str) -> str:
    if not config.base_url:
        raise AdapterFatal(f"no server: set platforms.{platform}.base_url (your Mattermost)")
    return config.base_url.rstrip("/")


async def _me(http: httpx.AsyncClient, base: str) -> tuple[dict[str, Any], int | None]:
    """The bot's user and the server's time (ms, by the answer's Date; None without);
    AdapterFatal for a refused token."""
    response = await http.get(api_url(base, "users/me"))
    answer = HttpAnswer.of(response)
    refusal = refusal_of(answer, "GET users/me")
    if refusal is not None:
        if refusal.status in (401, 403):
            raise AdapterFatal(f"Mattermost refused the token ({refusal.reason})")
        raise MattermostError(refusal)
    if not isinstance(answer.body, dict) or not answer.body.get("id"):
        raise MattermostError(Refusal(answer.status, "", "GET users/me: not a user"))
    return answer.body, server_ms(response.headers)
