"""The Telegram adapter: long polling that neither drops nor replays, sends with typed
results, a typing indicator while a turn runs.

- Start: `getMe` (a refused token is fatal: no restart, the status says why),
  `deleteWebhook` keeping pending updates (what was sent while hermes was down
  is answered), then `getUpdates` from the offset kept in state.db.
- An update is admitted (committed to the journal) before a later poll's offset
  confirms it to Telegram, and the offset is kept after each batch: a restart
  neither drops nor replays (a repeat is recognised by admission anyway).
- A button press (a `callback_query`) is admitted as its command, then answered
  (`answerCallbackQuery`, which stops the spinner on the button), a duplicate too,
  from a task of its own: one at a time, behind neither the poll nor the sends; a
  failed answer is logged (the press is admitted either way).
- One poll at a time, in one loop: a connection that is replaced (no progress
  within poll_timeout + MARGIN, the supervisor's restart) has its poll cancelled
  and awaited first, so hermes never stacks pollers. A 409 (another poller or
  a webhook) backs off inside the loop and shows in the status; never fatal.
- Sends run on their own client, concurrently with the poll, their buttons as an
  inline keyboard (keyboard.py), the plain resend too: 429 hands its
  retry_after to the outbox, 5xx and a failed connection retry, a request that
  may have arrived without an answer is Unconfirmed (never sent twice), a
  migrated group is followed and remembered, formatting Telegram cannot parse
  is sent once more as plain text, and blocked / not found / forbidden are dead.
- An edit (`edit_of`) is `editMessageText` of that message, on the same path: its
  text, parse mode and buttons as a send's (an edit without buttons drops the
  keyboard), the same answers; "message is not modified" is done, a message gone
  or past editing is Permanent(missing), and so is one left behind in a group that
  became a supergroup (the migration is remembered for what follows).
"""

from __future__ import annotations

import json
import logging
import math
import random
from typing import Any

import attrs
import httpx
import trio

from hermes.actors.backoff import Backoff
from hermes.adapters.base import AdapterFatal, AdapterSetup, required
from hermes.adapters.contract import (
    Cursor,
    Fetched,
    InboundEvent,
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    SendResult,
    Sent,
    Unconfirmed,
)
from hermes.adapters.http import TIMEOUT, HttpAdapter, HttpAnswer
from hermes.adapters.media import MAX_FILE, MediaError, Saved, download
from hermes.adapters.refusals import Codes
from hermes.adapters.settings import PlatformConfig
from hermes.adapters.telegram.api import DEFAULT_BASE, ApiError, BotApi, answered, refusal_of
from hermes.adapters.telegram.config import TelegramConfig
from hermes.adapters.telegram.inbound import Bot, MediaRef, incoming, pressed
from hermes.adapters.telegram.keyboard import inline_keyboard
from hermes.adapters.telegram.markdown import to_markdown_v2
from hermes.config import Secrets

log = logging.getLogger(__name__)

MARGIN = 10.0  # a poll not back within its timeout plus this: the connection is dead
# (a third of a shorter timeout, at least 1 s: tests poll for a second or two)
HTTP_SLACK = 15.0  # the poll's HTTP read timeout is later still: the watchdog decides
CALL_TIMEOUT = 30.0  # a poll's connect and write (its read: the poll's hold and a slack)
CONFLICT_BACKOFF = Backoff(minimum=1.0, maximum=15.0)
CODES = Codes(  # Telegram's words in a refusal's description
    bad_format=frozenset({"can't parse entities"}),
    not_modified=frozenset({"message is not modified"}),  # it shows this already
    # An edit of a message that is gone (deleted, never the bot's) or no longer editable.
    gone=frozenset({"message to edit not found", "message can't be edited", "message_id_invalid"}),
)
ANSWER_TIMEOUT = 10.0  # an answerCallbackQuery not back by then is given up (logged)
ANSWERS_WAITING = 64  # presses admitted and not yet answered; past that, left unanswered
QUERY_GONE = "query is too old"  # Telegram: answered already, or past its time


def _chat_ref(chat_id: str) -> int | str:
    """A numeric chat id as the number Telegram uses; a @channel name as it is."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


class TelegramAdapter(HttpAdapter[TelegramConfig]):
    platform = "telegram"
    concurrent_sends = 16
    typing_every = 4.0  # Telegram shows "typing" for about 5 s

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.token_env = config.token_env
        self.token = setup.secrets.get(config.token_env)
        self.base = config.base_url or DEFAULT_BASE
        self.poll_timeout = config.poll_timeout
        self.progress_deadline = config.poll_timeout + min(
            MARGIN, max(1.0, config.poll_timeout / 3)
        )
        self.offset_key = f"{setup.name}:offset"
        self.migrated_key = f"{setup.name}:migrated:"
        self.migrated: dict[str, str] = {}  # old chat id -> the supergroup it became
        self.api: BotApi | None = None  # for sends, downloads, typing: opened in on_start
        self.bot: Bot | None = None
        self.rng = random.Random()
        self.answers: trio.MemorySendChannel[str] | None = None  # presses to answer

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`getMe` on the Bot API client `connect()` uses; 401 (and 404, Telegram's
        answer to a malformed token) is a refusal, as at connect."""
        token = required(secrets, config.token_env, "telegram")
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            api = BotApi(http, config.base_url or DEFAULT_BASE, token)
            me = await _call(api, "getMe", None, config.token_env)
        return f"@{me.get('username')} (id {me.get('id')})"

    # -- the actor ------------------------------------------------------------

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
            self.migrated = await self.cursors.prefixed(self.migrated_key)
        await super().on_start()  # opens self.http
        self.api = BotApi(self.http, self.base, self.token or "")
        self.answers, waiting = trio.open_memory_channel[str](ANSWERS_WAITING)
        self.nursery.start_soon(self._answer_presses, waiting)

    # -- receiving --------------------------------------------------------------

    async def connect(self) -> None:
        required(self.secrets, self.token_env, self.platform)
        timeout = httpx.Timeout(CALL_TIMEOUT, read=self.poll_timeout + HTTP_SLACK)
        async with httpx.AsyncClient(timeout=timeout) as http:
            api = BotApi(http, self.base, self.token)
            me = await self._call(api, "getMe")
            self.bot = Bot(int(me["id"]), str(me.get("username") or ""))
            self.progress()
            await self._call(api, "deleteWebhook", {"drop_pending_updates": False})
            offset = await self._offset()
            conflicts = 0
            while True:
                params = {
                    "offset": offset,
                    "timeout": math.ceil(self.poll_timeout),
                    "allowed_updates": ["message", "callback_query"],
                }
                try:
                    updates = await self._call(api, "getUpdates", params)
                except ApiError as exc:
                    if exc.status not in (409, 429):
                        raise
                    conflicts += 1
                    await self._hold_off(exc, conflicts)
                    continue
                conflicts = 0
                self.progress()
                offset = await self._take(updates, offset)

    async def _call(self, api: BotApi, method: str, params: dict[str, Any] | None = None) -> Any:
        return await _call(api, method, params, self.token_env)

    async def _hold_off(self, exc: ApiError, attempt: int) -> None:
        """409 (another poller, or a webhook) or 429 on the poll: Telegram answered, so
        the connection lives; wait (less than the progress deadline) and poll again."""
        if exc.status == 429 and exc.retry_after:
            wait = exc.retry_after  # all of it: Telegram said how long
        else:
            wait = CONFLICT_BACKOFF.delay(attempt, self.rng)
        why = "another poller has this token" if exc.status == 409 else "rate limited"
        await self.wait_as_told(
            wait, f"getUpdates {exc.status}: {why}; polling again in {wait:.0f} s"
        )

    async def _offset(self) -> int:
        if self.cursors is None:
            return 0
        kept = await self.cursors.get(self.offset_key)
        return int(kept) if kept and kept.lstrip("-").isdigit() else 0

    async def _take(self, updates: Any, offset: int) -> int:
        """Admit each update in order; the new offset (kept in state.db, committed with the
        last of them) confirms them to Telegram with the next poll, only after all of
        them are committed. A press is answered once it is admitted."""
        if not isinstance(updates, list) or not updates:
            return offset
        taken: list[tuple[InboundEvent | None, str | None]] = []  # (to admit, to answer)
        for update in updates:
            try:
                update_id = int(update["update_id"])
            except (KeyError, TypeError, ValueError):
                log.warning("%s: an update without an update_id; skipped", self.name)
                continue
            offset = max(offset, update_id + 1)  # even one that cannot be read: never again
            try:
                found = self._read(update)
            except Exception as exc:  # a shape hermes does not know: skipped, not a crash loop
                log.warning("%s: skipping a malformed update %d: %r", self.name, update_id, exc)
                continue
            if found is not None:
                taken.append(found)
        kept = Cursor(self.offset_key, str(offset)) if self.cursors is not None else None
        last = max((n for n, (event, _) in enumerate(taken) if event is not None), default=None)
        for n, (event, query_id) in enumerate(taken):
            if event is not None:
                await self.admit(event, kept if n == last else None)
            if query_id is not None:
                self._answer(query_id)
        if last is None and kept is not None:
            await self.cursors.put(kept.key, kept.value)
        return offset

    def _read(self, update: dict[str, Any]) -> tuple[InboundEvent | None, str | None] | None:
        """What an update gives: the event to admit (a message's media is fetched only
        once it is authorized) and the id of a press to answer; None: nothing."""
        query = update.get("callback_query")
        if isinstance(query, dict):
            query_id = str(query["id"]) if query.get("id") else None
            try:
                event = pressed(query, self.platform)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.info("%s: a malformed button press: %r", self.name, exc)
                event = None
            if event is None:
                log.info(
                    "%s: answering and skipping button press %s: no command or chat",
                    self.name,
                    query_id,
                )
            return event, query_id
        found = incoming(update, self.bot, self.platform)
        if found is None:
            return None
        refs = tuple(ref.to_text() for ref in found.media)
        return attrs.evolve(found.event, attachments=refs), None

    def _answer(self, query_id: str) -> None:
        """Hand a press to the task that answers them (the poll goes on at once)."""
        try:
            self.answers.send_nowait(query_id)
        except trio.WouldBlock:
            log.warning(
                "%s: %d button presses wait for an answer; press %s is left unanswered",
                self.name,
                ANSWERS_WAITING,
                query_id,
            )

    async def _answer_presses(self, waiting: trio.MemoryReceiveChannel[str]) -> None:
        """Answer each press (`answerCallbackQuery`, no text: the spinner stops), one at a
        time, for the actor's life; a failure is only logged."""
        async for query_id in waiting:
            params = {"callback_query_id": query_id}
            try:
                await self.api.call("answerCallbackQuery", params, timeout=ANSWER_TIMEOUT)
            except ApiError as exc:  # a replayed press was answered before, or it is too old
                level = logging.INFO if QUERY_GONE in exc.description else logging.WARNING
                log.log(level, "%s: answering button press %s: %s", self.name, query_id, exc)
            except httpx.HTTPError as exc:
                log.warning("%s: answering button press %s failed: %r", self.name, query_id, exc)

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """The files saved to the cache; one that cannot be fetched is left out with a
        line saying so (the message is still answered)."""
        files, problems = [], []
        for text in attachments:
            try:
                ref = MediaRef.from_text(text)
                files.append(await self._download(ref))
            except (
                ApiError,
                MediaError,
                httpx.HTTPError,
                OSError,
                KeyError,
                TypeError,
                ValueError,
            ) as exc:
                problems.append(f"[an attachment could not be fetched: {exc}]")
        return Fetched(tuple(files), tuple(problems))

    async def _download(self, ref: MediaRef) -> Saved:
        if self.cache is None or self.api is None:
            raise ApiError("download", 0, "no cache directory")
        limit = min(self.media.max_file, MAX_FILE)
        if ref.size is not None and ref.size > limit:
            raise ApiError("download", 413, f"the file is {ref.size} bytes, over {limit}")
        info = await self.api.call("getFile", {"file_id": ref.file_id})
        url = self.api.file_url(str(info["file_path"]))
        limits = attrs.evolve(self.media, max_file=limit)
        return await download(
            self.api.http,
            url,
            self.cache,
            ref.unique_id + ref.suffix,
            limits=limits,
            progress=self.progress,
        )

    # -- the typing indicator ----------------------------------------------------

    async def type_once(self, event: InboundEvent) -> None:
        params: dict[str, Any] = {"chat_id": _chat_ref(event.chat_id), "action": "typing"}
        if event.thread_id:
            params["message_thread_id"] = _chat_ref(event.thread_id)
        await self.api.call("sendChatAction", params)

    # -- sending ------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        """`sendMessage`, or `editMessageText` of `request.edit_of`: the same text, parse
        mode and buttons, the same answers read the same way."""
        if self.api is None:
            return RetryAfter(None, "the adapter is not started")
        if not self.token:
            return Permanent(f"no token: set {self.token_env}")
        chat = self.migrated.get(request.target.chat_id, request.target.chat_id)
        params = self._params(request, chat)
        method = "sendMessage" if request.edit_of is None else "editMessageText"
        if request.file is not None:
            method = _file_method(request.file)
        for _ in range(2):  # once more in the supergroup a group became
            if request.file is None:
                answer = await self.post(self.api.url(method), params)
            else:
                answer = await self.upload(
                    self.api.url(method), _form(params), {FILE_FIELDS[method]: request.file}
                )
            if not isinstance(answer, HttpAnswer):
                return answer  # the request failed on the way
            try:
                message = answered(method, answer)
            except ApiError as exc:
                if exc.status == 200:  # taken, and an answer hermes cannot read
                    return Unconfirmed(f"{method}: {exc.description}")
                if exc.migrate_to and exc.migrate_to != str(params["chat_id"]):
                    await self._migrated(request.target.chat_id, exc.migrate_to)
                    if request.edit_of is not None:  # the message stays in the old group
                        return Permanent(f"{exc.status} {exc.description}", missing=True)
                    params["chat_id"] = _chat_ref(exc.migrate_to)
                    continue
                return self.refused(refusal_of(exc), CODES, request.edit_of)
            if request.edit_of is not None:
                return Sent(request.edit_of)
            found = message.get("message_id") if isinstance(message, dict) else None
            return Sent(str(found) if found is not None else None)
        return Permanent(f"chat {chat} migrated more than once in one send")

    def _params(self, request: SendRequest, chat: str) -> dict[str, Any]:
        """The parameters of the send (or the edit) `request` asks for, in `chat`."""
        params: dict[str, Any] = {"chat_id": _chat_ref(chat), "text": request.text}
        if not request.plain:
            params["text"] = to_markdown_v2(request.text)
            params["parse_mode"] = "MarkdownV2"
        if request.edit_of is not None:  # an edit keeps its place: no thread, no reply
            params["message_id"] = _chat_ref(request.edit_of)
        else:
            if request.target.thread_id:
                params["message_thread_id"] = _chat_ref(request.target.thread_id)
            if request.reply_to:
                params["reply_parameters"] = {
                    "message_id": _chat_ref(request.reply_to),
                    "allow_sending_without_reply": True,
                }
        if request.buttons:  # the plain resend too; an edit without them drops the keyboard
            markup, left_off = inline_keyboard(request.buttons)
            for line in left_off:
                log.warning("%s: %s", self.name, line)
            if markup is not None:
                params["reply_markup"] = markup
        return params

    async def _migrated(self, old: str, new: str) -> None:
        log.info(
            "%s: chat %s became the supergroup %s; sending there from now on", self.name, old, new
        )
        self.migrated[old] = new
        if self.cursors is not None:
            await self.cursors.put(self.migrated_key + old, new)


FILE_FIELDS = {"sendVoice": "voice", "sendPhoto": "photo", "sendDocument": "document"}
PHOTO_MAX = 10 * 1024 * 1024  # larger images go as documents (the Bot API's photo limit)


def _file_method(file: OutFile) -> str:
    if file.voice:
        return "sendVoice"
    if file.image and file.size <= PHOTO_MAX and file.mime in ("image/jpeg", "image/png"):
        return "sendPhoto"
    return "sendDocument"


def _form(params: dict[str, Any]) -> dict[str, str]:
    """A send's parameters as a multipart form: the text is the caption, and nested
    values go as JSON text."""
    form = {
        "caption" if k == "text" else k: v if isinstance(v, str) else json.dumps(v)
        for k, v in params.items()
    }
    if not form.get("caption"):
        form.pop("caption", None)
        form.pop("parse_mode", None)
    return form


async def _call(
    api: BotApi, method: str, params: dict[str, Any] | None, token_env: str | None
) -> Any:
    """A Bot API call; a refused token (401, or getMe's 404 for a malformed one) is fatal."""
    try:
        return await api.call(method, params)
    except ApiError as exc:
        if exc.status == 401 or (exc.status == 404 and method == "getMe"):
            raise AdapterFatal(
                f"Telegram refused the token ({exc.status} {exc.description}):"
                f" check {token_env} and base_url"
            ) from None
        raise
