"""The Matrix adapter: our own client over httpx (no SDK's sync loop).

- Start: `whoami` with the access token (401: fatal; another account than `user_id`:
  fatal). Without a token variable, a password login once: its token and device are
  kept in state.db, and every later start uses them. Then `/sync` long polls from the
  kept `since`. The very first sync (no token kept) only marks where hermes begins: the
  rooms' history before it is not answered.
- A timeline the homeserver cut (`limited`) is filled from `/messages`, back to the
  last token, up to MAX_GAP events; a 429 on the sync waits as long as it says.
- A batch's `next_batch` commits with the admission of its last event (or alone, when it
  brought none): a crash before that replays the batch, and the journal, keyed by
  event_id, answers nothing twice. Every answered sync is progress; the deadline covers a
  sync the homeserver never answers.
- Encrypted rooms (with `pickle_key_env` set; encryption.py): a batch's to-device room
  keys are taken, and kept, before its rooms' events are read; an event whose key has
  not come waits for it.
- Invites are joined when an allowed user (or an owner) sent them, and, where strangers
  are offered pairing (no allowlist), a stranger's DM invite (a few an hour), so the
  pairing code can be answered; others are left pending and logged. A DM is a room in
  `m.direct` or one of two members; in other rooms the bot answers when mentioned or
  replied to (the intake's `groups.activation`).
- Sends: `PUT /rooms/{room}/send/{type}/{txnId}` with a transaction id from the outbox
  row's idempotency key, which the homeserver deduplicates (the platform says so);
  encrypted in an encrypted room, the answer's HTML as `formatted_body`, an edit as
  `m.replace`. Threads and replies as `m.relates_to`; 429 waits `retry_after_ms`.
- Media (media.py): a file is uploaded (encrypted for an encrypted room), then sent as
  an event the same way; an event's file is fetched once the event is authorized.
"""

from __future__ import annotations

import collections
import json
import logging
from typing import Any

import httpx
import trio

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
)
from hermes.adapters.http import CONNECT_TIMEOUT, HttpAdapter, HttpAnswer, failed_send
from hermes.adapters.markdown_html import markdown_html
from hermes.adapters.matrix.api import (
    CODES,
    MatrixError,
    as_dict,
    as_list,
    call,
    client_url,
    error_of,
    refusal_of,
    sent_or_refusal,
    txn_id,
)
from hermes.adapters.matrix.config import MatrixConfig
from hermes.adapters.matrix.encryption import Encryption, RoomSettings, encryption_of
from hermes.adapters.matrix.inbound import RoomView, read_event
from hermes.adapters.matrix.media import Uploaded, fetch_media, file_content, upload
from hermes.adapters.matrix.olm import MEGOLM, Olm
from hermes.adapters.refusals import Refusal
from hermes.adapters.settings import PlatformConfig
from hermes.config import Secrets

log = logging.getLogger(__name__)

MIN_SLACK = 5.0  # seconds past the sync's own hold (or half of it) before it is overdue
MAX_GAP = 200  # events read back through a cut timeline; older ones are not answered
GAP_PAGE = 50
STRANGER_JOINS = 5  # strangers' DM invites joined an hour, where pairing is offered
MY_EVENTS = 500  # event ids of hermes's own messages kept, so a reply to one is addressed


class MatrixAdapter(HttpAdapter[MatrixConfig]):
    platform = "matrix"
    typing_every = 8.0  # each notice asks for 10 s (its `timeout`)

    def __init__(self, setup: AdapterSetup) -> None:
        super().__init__(setup)
        config = self.config
        self.token = setup.secrets.get(config.token_env)
        self.password = setup.secrets.get(config.password_env)
        self.pickle_secret = setup.secrets.get(config.pickle_key_env)
        self.encryption: Encryption | None = None  # once its state is loaded
        self.room_encryption: RoomSettings = {}  # what each room's m.room.encryption says
        self.first_batch = True  # of this connection: every waiting message is looked at
        self.login_key = f"{setup.name}:login"  # {access_token, device_id} of a login
        self.base = config.base_url or ""
        self.since_key = f"{setup.name}:since"
        self.progress_deadline = config.sync_timeout + max(MIN_SLACK, config.sync_timeout / 2)
        self.direct: set[str] = set()  # rooms some m.direct names
        self.joined: dict[str, int] = {}  # a room's joined members, as its summary says
        self.mine: collections.deque[str] = collections.deque(maxlen=MY_EVENTS)
        self.stranger_joins: collections.deque[float] = collections.deque()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @classmethod
    async def check_token(cls, config: PlatformConfig, secrets: Secrets) -> str:
        """`whoami` with the token; with a password instead, only that the homeserver
        answers (a login here would make a device each time doctor runs)."""
        config = cls.configured(config)
        token = secrets.get(config.token_env)
        if not config.base_url or not (token or secrets.get(config.password_env)):
            raise AdapterFatal("set base_url, and token_env or password_env")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT, headers=headers) as http:
            if token is None:
                url = config.base_url.rstrip("/") + "/_matrix/client/versions"
                answer = HttpAnswer.of(await http.get(url))
                if answer.status != 200:
                    raise error_of("versions", answer)
                return f"{config.user_id}: logs in with its password at serve's first start"
            who = await call(http, config.base_url, "GET", "account/whoami")
        return f"{who.get('user_id')} (device {who.get('device_id')})"

    async def on_start(self) -> None:
        if self.cursors is not None:
            await self.exits.enter_async_context(self.cursors)
        if not self.token and self.password and self.base and self.cursors is not None:
            self.token = await self._logged_in()
        await super().on_start()  # its client carries the token

    async def _logged_in(self) -> str:
        """The token of the login kept in state.db, or of a new password login (kept)."""
        assert self.cursors is not None
        kept = json.loads(await self.cursors.get(self.login_key) or "{}")
        if isinstance(kept.get("access_token"), str):
            return kept["access_token"]
        body = {
            "type": "m.login.password",
            "password": self.password,
            "identifier": {"type": "m.id.user", "user": self.config.user_id},
            "initial_device_display_name": self.config.device_name,
        }
        async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT) as http:
            response = await http.post(client_url(self.base, "login"), json=body)
        answer = HttpAnswer.of(response)
        login = as_dict(answer.body)
        if response.status_code in (401, 403):
            raise AdapterFatal(f"Matrix refused the password ({error_of('login', answer)})")
        if response.status_code != 200 or not isinstance(login.get("access_token"), str):
            raise error_of("login", answer)
        await self.cursors.put(
            self.login_key,
            json.dumps(
                {"access_token": login["access_token"], "device_id": login.get("device_id")}
            ),
        )
        log.info(
            "%s: logged in as %s (device %s)",
            self.name,
            login.get("user_id"),
            login.get("device_id"),
        )
        return login["access_token"]

    # -- receiving ------------------------------------------------------------------------

    async def connect(self) -> None:
        if not self.token:  # neither a token nor a password to log in with
            required(self.secrets, self.config.token_env or self.config.password_env, self.platform)
        if not self.base or not self.config.user_id:
            raise AdapterFatal(f"set platforms.{self.name}.base_url and user_id")
        timeout = httpx.Timeout(CONNECT_TIMEOUT, read=2 * self.progress_deadline)  # its backstop
        async with httpx.AsyncClient(timeout=timeout, headers=self.headers()) as http:
            who = await call(http, self.base, "GET", "account/whoami")
            if who.get("user_id") != self.config.user_id:
                raise AdapterFatal(
                    f"the token is {who.get('user_id')}'s, not {self.config.user_id}'s"
                )
            self.progress()
            if self.pickle_secret and self.cursors is not None:
                self.encryption = await self._encryption(http, who.get("device_id"))
            since = await self.cursors.get(self.since_key) if self.cursors is not None else None
            self.first_batch = True
            while True:
                params: dict[str, Any] = {"timeout": int(self.config.sync_timeout * 1000)}
                if since:
                    params["since"] = since
                try:
                    batch = await call(http, self.base, "GET", "sync", params=params)
                except MatrixError as exc:
                    if exc.status != 429 and exc.errcode != "M_LIMIT_EXCEEDED":
                        raise
                    await self._hold_off(exc)
                    continue
                self.progress()
                since = await self._take(http, batch, since)
                self.settled()

    async def _encryption(self, http: httpx.AsyncClient, device: Any) -> Encryption:
        """This device's encryption state, loaded (its keys published) before any send
        may use it: until then a send to an encrypted room waits."""
        if not isinstance(device, str) or not device:
            raise AdapterFatal("whoami named no device: the token is not a device's")
        assert self.cursors is not None and self.pickle_secret
        olm = Olm(
            self.cursors,
            f"{self.name}:e2ee:{device}:",
            self.pickle_secret,
            self.config.user_id or "",
            device,
        )
        encryption = Encryption(olm, self.config, self.base, self.room_encryption, self._tell)
        await encryption.start(http)
        return encryption

    def _tell(self, sender: str, room_id: str) -> bool:
        """Whether a sender is told hermes could not read their message: in a DM, when
        the config lets them talk (a user let in by pairing is not known here; their
        message is still answered if its key comes)."""
        return self._is_direct(room_id) and self.allowed(sender)

    async def _hold_off(self, exc: MatrixError) -> None:
        """The homeserver said how long to wait: it answered, so the connection lives,
        backing off (shown) until then."""
        wait = exc.retry_after if exc.retry_after is not None else 1.0
        await self.wait_as_told(wait, f"sync rate limited; syncing again in {wait:.0f} s")

    async def _take(self, http: httpx.AsyncClient, batch: dict[str, Any], since: str | None) -> str:
        """Admit every message of a batch in order; its `next_batch`, kept with the last
        admission (or alone), is where the next sync starts."""
        next_batch = batch.get("next_batch")
        if not isinstance(next_batch, str) or not next_batch:
            raise MatrixError("sync", 200, "M_BAD_JSON", "no next_batch")
        rooms = as_dict(batch.get("rooms"))
        self._read_direct(batch.get("account_data"))
        if self.encryption is not None:
            self.encryption.joined.update(as_dict(rooms.get("join")))
            self.encryption.joined.difference_update(as_dict(rooms.get("leave")))
        keyed = await self._keys_of(http, batch)
        for room_id, invite in as_dict(rooms.get("invite")).items():
            await self._invited(http, room_id, invite)
        taken: list[InboundEvent] = []
        for room_id, room in as_dict(rooms.get("join")).items():
            count = as_dict(room.get("summary")).get("m.joined_member_count")
            if isinstance(count, int):
                self.joined[room_id] = count
            timeline = as_dict(room.get("timeline"))
            events = as_list(timeline.get("events"))
            await self._room_state(
                room_id, [*as_list(as_dict(room.get("state")).get("events")), *events], since
            )
            if since is None:
                continue  # the first sync: where hermes begins, not what it answers
            if timeline.get("limited") is True and isinstance(timeline.get("prev_batch"), str):
                events = [*await self._gap(http, room_id, timeline["prev_batch"], since), *events]
            for event in events:
                if isinstance(event, dict):
                    found = await self._read(room_id, event)
                    if found is not None:
                        taken.append(found)
        opened = []
        if self.encryption is not None:  # a start's first batch looks at all that waits
            opened = await self.encryption.unlocked(None if self.first_batch else keyed)
        self.first_batch = False
        for room_id, event in opened:
            if (found := await self._read(room_id, event)) is not None:
                taken.append(found)
        if self.encryption is not None:
            await self.encryption.keep_waiting()  # before the batch is committed
        kept = Cursor(self.since_key, next_batch) if self.cursors is not None else None
        for n, found in enumerate(taken):
            await self.admit(found, kept if n == len(taken) - 1 else None)
        if not taken and kept is not None and next_batch != since:
            await self.cursors.put(kept.key, kept.value)
        if self.encryption is not None:
            await self.encryption.done([e["event_id"] for _, e in opened])
            await self.encryption.overdue(http)
        return next_batch

    async def _keys_of(self, http: httpx.AsyncClient, batch: dict[str, Any]) -> set[str]:
        """The batch's room keys and device changes taken in (before its rooms, whose
        events they open); the one-time keys topped up. The rooms that got keys."""
        if self.encryption is None:
            return set()
        to_device = as_list(as_dict(batch.get("to_device")).get("events"))
        keyed = await self.encryption.to_device(http, to_device)
        lists = as_dict(batch.get("device_lists"))
        self.encryption.devices_changed(
            [*as_list(lists.get("changed")), *as_list(lists.get("left"))]
        )
        await self.encryption.top_up(http, batch)
        return keyed

    async def _room_state(self, room_id: str, events: list[Any], since: str | None) -> None:
        """What a room's events change besides its messages: its encryption; in an
        encrypted room, the key of hermes's next message when someone joined or left; a
        waiting message its sender redacted."""
        for event in events:
            if not isinstance(event, dict):
                continue
            kind, content = event.get("type"), as_dict(event.get("content"))
            if kind == "m.room.encryption" and content.get("algorithm") == MEGOLM:
                self.room_encryption[room_id] = content
            if self.encryption is None or since is None:
                continue
            if kind == "m.room.member":
                before = as_dict(as_dict(event.get("unsigned")).get("prev_content"))
                if content.get("membership") != before.get("membership"):
                    await self.encryption.membership_changed(room_id)
            elif kind == "m.room.redaction":
                self.encryption.forget(event.get("redacts") or content.get("redacts"))

    async def _read(self, room_id: str, event: dict[str, Any]) -> InboundEvent | None:
        if event.get("type") == "m.room.encrypted":
            self.room_encryption.setdefault(room_id, {"algorithm": MEGOLM})
            if self.encryption is None:
                log.warning(
                    "%s: %s is encrypted and no pickle_key_env is set: its messages cannot be read",
                    self.name,
                    room_id,
                )
                return None
            opened = await self.encryption.decrypt(room_id, event)
            if opened is None:
                return None
            event = opened
        view = RoomView(
            self.config.user_id or "", None, self._is_direct(room_id), frozenset(self.mine)
        )
        return read_event(event, room_id, view, self.platform)

    def allowed(self, user: str) -> bool:
        """Whether `user` may talk to hermes here as the config says (invites, notices)."""
        config = self.config
        return config.allow_all_users or user in config.allowed_users or user == config.owner

    async def _gap(
        self, http: httpx.AsyncClient, room_id: str, start: str, since: str
    ) -> list[Any]:
        """The events the homeserver left out of a cut timeline, oldest first: paged back
        from `start` to the last sync's token, at most MAX_GAP of them."""
        found: list[Any] = []
        token: str | None = start
        while token and len(found) < MAX_GAP:
            params = {"from": token, "to": since, "dir": "b", "limit": GAP_PAGE}
            page = await call(http, self.base, "GET", f"rooms/{room_id}/messages", params=params)
            chunk = as_list(page.get("chunk"))
            found += chunk
            token = page.get("end") if chunk and isinstance(page.get("end"), str) else None
            self.progress()
        if len(found) >= MAX_GAP:
            log.warning(
                "%s: %s was cut by more than %d events; the older ones are not answered",
                self.name,
                room_id,
                MAX_GAP,
            )
        return list(reversed(found[:MAX_GAP]))

    def _read_direct(self, account_data: Any) -> None:
        for event in as_list(as_dict(account_data).get("events")):
            if isinstance(event, dict) and event.get("type") == "m.direct":
                content = as_dict(event.get("content"))
                self.direct = {
                    r for rooms in content.values() for r in as_list(rooms) if isinstance(r, str)
                }

    def _is_direct(self, room_id: str) -> bool:
        return room_id in self.direct or self.joined.get(room_id) == 2

    async def _invited(self, http: httpx.AsyncClient, room_id: str, invite: Any) -> None:
        """Join a room an allowed user invited hermes to, or, where strangers are offered
        pairing (no allowlist), a stranger's DM (a few an hour): the pairing code is
        answered there. Other invites are left pending."""
        stripped = as_list(as_dict(as_dict(invite).get("invite_state")).get("events"))
        mine = next(
            (
                e
                for e in stripped
                if isinstance(e, dict)
                and e.get("type") == "m.room.member"
                and e.get("state_key") == self.config.user_id
            ),
            {},
        )
        inviter = mine.get("sender")
        direct = as_dict(mine.get("content")).get("is_direct") is True
        if not isinstance(inviter, str):
            return
        if not self.allowed(inviter) and not (direct and self._pairing_join()):
            log.info(
                "%s: an invite to %s from %s is left pending (not an allowed user)",
                self.name,
                room_id,
                inviter,
            )
            return
        try:
            await call(http, self.base, "POST", f"rooms/{room_id}/join", {})
            if not self.allowed(inviter):  # `is_direct` is the stranger's word: checked
                members = await call(http, self.base, "GET", f"rooms/{room_id}/joined_members")
                if len(as_dict(members.get("joined"))) > 2:
                    log.info("%s: %s, a stranger's DM, has more members: left", self.name, room_id)
                    await call(http, self.base, "POST", f"rooms/{room_id}/leave", {})
                    return
        except MatrixError as exc:
            log.warning("%s: joining %s failed: %s", self.name, room_id, exc)
            return
        log.info("%s: joined %s, invited by %s", self.name, room_id, inviter)

    def _pairing_join(self) -> bool:
        """Whether a stranger's DM invite is joined now: only where pairing is offered,
        and at most STRANGER_JOINS an hour (an invite costs a stranger nothing)."""
        if self.config.allowed_users or self.config.allow_all_users:
            return False
        now = trio.current_time()
        while self.stranger_joins and self.stranger_joins[0] < now - 3600:
            self.stranger_joins.popleft()
        if len(self.stranger_joins) >= STRANGER_JOINS:
            return False
        self.stranger_joins.append(now)
        return True

    # -- sending --------------------------------------------------------------------------

    async def send(self, request: SendRequest) -> SendResult:
        if request.file is not None:
            return await self._send_file(request, request.file)
        content: dict[str, Any] = {"msgtype": "m.text", "body": request.text}
        if not request.plain:
            html = markdown_html(request.text)
            content.update(format="org.matrix.custom.html", formatted_body=html)
        if request.edit_of is not None:
            replaced = {"rel_type": "m.replace", "event_id": request.edit_of}
            new = dict(content)
            content = {
                **new,
                "body": "* " + request.text,
                "m.new_content": new,
                "m.relates_to": replaced,
            }
        return await self._send_event(request, self._related(request, content))

    async def _send_file(self, request: SendRequest, file: OutFile) -> SendResult:
        """The file uploaded (encrypted for an encrypted room, never in the clear there),
        then its event sent as a text is. Nothing shows before that event: an upload that
        failed in any way goes again from the start."""
        room = request.target.chat_id
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        try:
            encrypted = await encryption_of(self.http, self.base, room, self.room_encryption)
        except MatrixError as exc:
            return self.refused(refusal_of(exc), CODES)
        except httpx.HTTPError as exc:
            return RetryAfter(None, f"not sent: {type(exc).__name__}")  # nothing shows yet
        if encrypted is not None and self.encryption is None:
            return self._cannot_seal(room)
        uploaded = await upload(self.http, self.base, file, encrypted is not None)
        if not isinstance(uploaded, Uploaded):
            return uploaded
        content = file_content(file, request.text, uploaded)
        if request.text and not request.plain:
            content.update(
                format="org.matrix.custom.html", formatted_body=markdown_html(request.text)
            )
        return await self._send_event(
            request, self._related(request, content), clear_file=uploaded.sealed is None
        )

    def _related(self, request: SendRequest, content: dict[str, Any]) -> dict[str, Any]:
        """`content` in the target's thread, or replying to the message it answers."""
        target = request.target
        if request.edit_of is not None:
            return content
        if target.thread_id:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": target.thread_id,
                "is_falling_back": request.reply_to is None,
                "m.in_reply_to": {"event_id": request.reply_to or target.thread_id},
            }
        elif request.reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": request.reply_to}}
        return content

    async def _send_event(
        self, request: SendRequest, content: dict[str, Any], clear_file: bool = False
    ) -> SendResult:
        """`PUT .../send/{type}/{txnId}`, sealed in an encrypted room (`clear_file`: the
        event names a file uploaded in the clear, which must not go to a room that turned
        encrypted meanwhile)."""
        target = request.target
        try:
            sealed = await self._sealed(target.chat_id, content)
        except MatrixError as exc:
            return self.refused(refusal_of(exc), CODES)
        except httpx.HTTPError as exc:
            return failed_send(exc)  # the key share's; the message itself never left
        if not isinstance(sealed, tuple):
            return sealed
        kind, content = sealed
        if clear_file and kind == "m.room.encrypted":
            return RetryAfter(None, "the room turned encrypted: the file goes again, encrypted")
        edit = request.text if request.edit_of is not None else None
        txn = txn_id(request.idempotency_key, edit)
        url = client_url(self.base, "rooms", target.chat_id, "send", kind, txn)
        answer = await self.post(url, content, method="PUT")
        result = sent_or_refusal(answer) if isinstance(answer, HttpAnswer) else answer
        if isinstance(result, Refusal):
            result = self.refused(result, CODES)
        if isinstance(result, Sent) and result.message_id is not None:
            self.mine.append(result.message_id)
            if request.edit_of is not None:
                return Sent(request.edit_of)
        return result

    async def _sealed(
        self, room_id: str, content: dict[str, Any]
    ) -> tuple[str, dict[str, Any]] | SendResult:
        """The event's type and content as they go, encrypted in an encrypted room; never
        in the clear there."""
        if self.http is None:
            return RetryAfter(None, "the adapter is not started")
        if self.encryption is not None:
            return await self.encryption.seal(self.http, room_id, "m.room.message", content)
        if await encryption_of(self.http, self.base, room_id, self.room_encryption) is None:
            return "m.room.message", content
        return self._cannot_seal(room_id)

    def _cannot_seal(self, room_id: str) -> SendResult:
        """A send to an encrypted room without the encryption state: without a pickle key,
        refused; before the state is loaded (the adapter starting), not yet."""
        if self.pickle_secret:
            return RetryAfter(None, "the room is encrypted and the encryption state is loading")
        return Permanent(f"{room_id} is encrypted: set platforms.{self.name}.pickle_key_env")

    async def fetch(self, attachments: tuple[str, ...]) -> Fetched:
        """The files of an authorized message, from the homeserver with the token,
        decrypted where they were sent encrypted, streamed to the cache."""
        return await fetch_media(self.http, self.base, attachments, self.cache, self.media)

    async def type_once(self, event: Any) -> None:
        if self.http is None:
            return
        url = client_url(self.base, "rooms", event.chat_id, "typing", self.config.user_id or "")
        await self.http.put(url, json={"typing": True, "timeout": 10_000})
