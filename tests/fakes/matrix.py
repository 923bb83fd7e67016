"""A fake Matrix homeserver on 127.0.0.1: the part of the client-server API a bot speaks
(its own `/sync` loop, sends, joins, account data, the key and to-device endpoints E2EE
needs), for the tests of the Matrix adapter.

Every call goes to `{url}/_matrix/client/v3/...` (`/r0/` is taken too) with the access
token as `Authorization: Bearer <token>` (or `?access_token=`); `GET
/_matrix/client/versions` and `/login` need none. Errors are Matrix's: `{"errcode":
"M_...", "error": "..."}`: no token 401 `M_MISSING_TOKEN`, an unknown or revoked one 401
`M_UNKNOWN_TOKEN` (with `soft_logout: false`), an unknown path 404 `M_UNRECOGNIZED` (405
for a known path and another verb), a body that is not a JSON object 400 `M_NOT_JSON` /
`M_BAD_JSON`.

    GET  account/whoami                      -> {user_id, device_id, is_guest}
    GET  login                               -> {flows: [{type: m.login.password}]}
    POST login  {type: m.login.password, identifier: {type: m.id.user, user}, password,
                 device_id?, initial_device_display_name?}
                                             -> {user_id, access_token, device_id, home_server};
                 a device_id given again loses its earlier tokens (as the spec says); a
                 wrong password 403 M_FORBIDDEN
    POST logout                              -> {}; the token, its device and its keys go
    GET  sync  (since, timeout, full_state; filter and set_presence ignored)
    PUT  rooms/{roomId}/send/{type}/{txnId}  -> {event_id}
    PUT  rooms/{roomId}/redact/{eventId}/{txnId} -> {event_id}; the target's content is
                 emptied (a state event's is kept)
    POST rooms/{roomId}/join, join/{roomIdOrAlias} -> {room_id}: invited, or a public room
    POST rooms/{roomId}/leave                -> {}
    GET  rooms/{roomId}/joined_members       -> {joined: {user: {display_name}}}
    GET  joined_rooms                        -> {joined_rooms: [...]}
    GET  rooms/{roomId}/state[/{type}[/{stateKey}]] -> the state events / one's content
    GET  rooms/{roomId}/messages (from, to, dir, limit) -> {start, end?, chunk, state}
    GET/PUT user/{userId}/account_data/{type}
    PUT  rooms/{roomId}/typing/{userId}      -> {}; recorded in `typing`
    POST rooms/{roomId}/receipt/{type}/{eventId} -> {}; recorded in `receipts`
    POST user/{userId}/filter                -> {filter_id}; the filter is not applied
    POST keys/upload, keys/query, keys/claim; PUT sendToDevice/{type}/{txnId}

The media repository (Matrix 1.11's authenticated media):

    POST /_matrix/media/v3/upload?filename=  (the body the file, Content-Type its type)
                                             -> {content_uri: mxc://test.local/<id>}; no
                 Content-Length 400 (Synapse takes no chunked upload); over `max_upload`
                 (50 MiB, Synapse's default) 413 M_TOO_LARGE
    GET  /_matrix/client/v1/media/download/{serverName}/{mediaId}[/{fileName}] (a token)
                                             -> the bytes, as uploaded; unknown 404 M_NOT_FOUND
    GET  /_matrix/client/v1/media/config     -> {m.upload.size}
    GET  /_matrix/media/v3/download/...      -> 404 M_NOT_FOUND, as Synapse answers for
                 media uploaded since it requires authentication; with
                 `authenticated_media = False` (a homeserver older than 1.11) it serves,
                 without a token, and the `/_matrix/client/v1/media/` paths are 404
                 M_UNRECOGNIZED

Sync tokens are `s<N>`, a position in one stream the fake keeps for its whole life: every
room event, account-data change, to-device message and device-key change takes the next
position. A sync answers what came after `since`, so an old `since` replays everything
after it (rooms' timelines, invites, leaves, account data, device-list changes);
`next_batch` is the position at answering. Without `since` (or with `full_state=true`) it
answers at once; else at once when there is something new, or it holds up to `timeout`
ms, woken by whatever a test or another client adds (never by polling). A joined room
gives `timeline` {events, limited, prev_batch}, `state`, `summary` (heroes, member
counts), empty `ephemeral` and `account_data`. A room joined since `since` (or any room
in a sync without `since`) gives its last `timeline_limit` events (10), limited when
there are more, and the state before them; a room joined before `since` gives every event
after it, unlimited, unless `limit_timeline()` asked otherwise. An invite gives
`rooms.invite.{id}.invite_state` (stripped state: create, join rules, name, topic, alias,
encryption, the inviter's and the invite's membership, `is_direct` there for a DM); a
leave after `since`, `rooms.leave.{id}` with the timeline up to it. Top level:
`account_data`, `to_device.events`, `device_lists` {changed, left},
`device_one_time_keys_count` (always signed_curve25519) and
`device_unused_fallback_key_types` of the token's device. An event sent by a device
carries `unsigned.transaction_id` in that device's own syncs, as a homeserver does.

`prev_batch` (and `/messages`' `end`) are stream tokens too: `/messages?from=...&dir=b`
pages back from there, newest first, `end` left out once nothing is older.

Sends are deduplicated by (user, device, path) - the spec's transaction scope: the same
txnId again answers the same event_id and records nothing. Sent events land in the room
like any other (so in every member's sync, the sender's too) and in `sent`.

Keys are stored and served as given (the crypto is the clients'): keys/upload keeps
device_keys (user_id and device_id must be the token's: 400 M_INVALID_PARAM), one-time
keys (one id uploaded again with another key: 400) and one fallback key per algorithm,
and answers `one_time_key_counts`; keys/query answers the uploaded device keys (plus
`unsigned.device_display_name` when known); keys/claim removes and answers one one-time
key of the algorithm asked per device, else that device's fallback key (kept, marked
used). New or changed device keys put their user in `device_lists.changed` of every user
sharing a joined room with them (themselves included); so does a join into an encrypted
room both share, and a leave that ends the last shared encrypted room puts them in
`left`. sendToDevice delivers to each device named (`*`: all the user's devices) in its
next sync's `to_device.events` ({sender, type, content}) until a sync with a later
`since` acknowledges it, as the spec says: delivered once.

The test drives the fake from its own thread (every method is thread-safe): accounts
(`add_user`, `token_of`, `revoke_token`), rooms (`create_room`, `invite`, `join`,
`leave`), events (`message`, `event`, `set_account_data`, `to_device`), media
(`add_media`, `media_content`), the sync's shape (`limit_timeline`, `hang_syncs` /
`unhang_syncs`) and faults (`fail`: the next calls of an endpoint answer an error - 429
M_LIMIT_EXCEEDED with `retry_after_ms` and `Retry-After`, 403 M_FORBIDDEN, a 5xx). It
reads what clients did in `requests`, `sent`, `refused`, `rate_limited`,
`to_device_sent`, `typing`, `receipts`, `claims`, `syncs`, `held_syncs`, `uploads`,
`downloads` and waits with `wait_until`, `wait_sent`, `wait_syncs`, `wait_held_syncs`,
`wait_uploads`, `wait_downloads` ..., which block on a condition (no sleeping) and raise
TimeoutError naming what they waited for. A handler's own exception answers 500
M_UNKNOWN and is kept in `internal_errors`. `close()` returns at once (held syncs get no
answer).

Where the fake knowingly differs from a homeserver: one server (`test.local`), no
federation, no room versions beyond "10" and no authorisation rules beyond membership (a
joined user may send anything, a member event from the test is taken as given); the
filter is not applied (`timeline_limit` stands for its `room.timeline.limit`, and only
for newly joined rooms); history is visible to every member; no presence, no ephemeral
events, no unread counts, no cross-signing keys; a held sync whose client went away is
answered (into nothing) when it wakes, not dropped at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import secrets
import string
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import attrs

from tests.fakes.kit import Fake, infos, observed, serve_until_killed
from tests.fakes.local_http import (
    ErrorShape,
    Reply,
    TrackedHandler,
    bearer,
    copy_json,
    match,
    query,
    routes,
)

SERVER_NAME = "test.local"
HERMES = f"@hermes:{SERVER_NAME}"
ALICE = f"@alice:{SERVER_NAME}"
BOB = f"@bob:{SERVER_NAME}"
HERMES_TOKEN = "syt_aGVybWVz_fake_hermes_token"
ALICE_TOKEN = "syt_YWxpY2U_fake_alice_token"
BOB_TOKEN = "syt_Ym9i_fake_bob_token"
HERMES_DEVICE = "HERMESDEV"
ALICE_DEVICE = "ALICEDEV"
BOB_DEVICE = "BOBDEV"
PASSWORD = "correct horse battery staple"  # every user's, unless add_user() says otherwise
ROOM_VERSION = "10"
MEGOLM = "m.megolm.v1.aes-sha2"
TIMELINE_LIMIT = 10  # a newly joined room's timeline, as with no filter
PAGE_LIMIT = 10  # /messages' default
MAX_UPLOAD = 50 * 1024 * 1024  # Synapse's default max_upload_size (50M, in MiB)
KEPT_UPLOAD = 1024 * 1024  # an upload up to this keeps its `content` in `uploads`
VERSIONS = ["r0.6.1", "v1.1", "v1.2", "v1.3", "v1.4", "v1.5", "v1.6", "v1.7", "v1.8", "v1.9",
            "v1.10", "v1.11"]  # fmt: skip
_TOKEN = re.compile(r"s(\d+)")
_INVITE_STATE = ("m.room.create", "m.room.join_rules", "m.room.name", "m.room.avatar",
                 "m.room.topic", "m.room.canonical_alias", "m.room.encryption")  # fmt: skip
_ERRCODES = {400: "M_BAD_JSON", 401: "M_UNKNOWN_TOKEN", 403: "M_FORBIDDEN", 404: "M_NOT_FOUND",
             429: "M_LIMIT_EXCEEDED"}  # fmt: skip
_ERRORS = {"M_LIMIT_EXCEEDED": "Too Many Requests", "M_FORBIDDEN": "Forbidden",
           "M_NOT_FOUND": "Not found", "M_UNKNOWN_TOKEN": "Unrecognised access token",
           "M_UNKNOWN": "Internal server error"}  # fmt: skip

# (verb, path under /_matrix/client/v3/ with "*" for a parameter, endpoint name)
_ROUTES = routes(  # after /_matrix/client/v3 (or r0); the handler: `_api_<endpoint>`
    ("GET", "/account/whoami", "whoami"),
    ("GET", "/login", "login_flows"),
    ("POST", "/login", "login"),
    ("POST", "/logout", "logout"),
    ("GET", "/sync", "sync"),
    ("PUT", "/rooms/{room}/send/{type}/{txn}", "send"),
    ("PUT", "/rooms/{room}/redact/{event}/{txn}", "redact"),
    ("POST", "/rooms/{room}/join", "join"),
    ("POST", "/join/{room}", "join"),
    ("POST", "/rooms/{room}/leave", "leave"),
    ("GET", "/rooms/{room}/joined_members", "joined_members"),
    ("GET", "/joined_rooms", "joined_rooms"),
    ("GET", "/rooms/{room}/state", "state"),
    ("GET", "/rooms/{room}/state/{type}", "state"),
    ("GET", "/rooms/{room}/state/{type}/{key}", "state"),
    ("GET", "/rooms/{room}/messages", "messages"),
    ("GET", "/user/{user}/account_data/{kind}", "account_data"),
    ("PUT", "/user/{user}/account_data/{kind}", "account_data"),
    ("PUT", "/rooms/{room}/typing/{user}", "typing"),
    ("POST", "/rooms/{room}/receipt/{receipt_type}/{event}", "receipt"),
    ("POST", "/user/{user}/filter", "filter"),
    ("POST", "/keys/upload", "keys/upload"),
    ("POST", "/keys/query", "keys/query"),
    ("POST", "/keys/claim", "keys/claim"),
    ("PUT", "/sendToDevice/{type}/{txn}", "sendToDevice"),
)
_NO_AUTH = frozenset({"login", "login_flows"})
_BODY_VERBS = frozenset({"POST", "PUT"})


def user_id(user: str) -> str:
    """A user id from a localpart ("alice") or a user id."""
    return user if user.startswith("@") else f"@{user}:{SERVER_NAME}"


def localpart(user: str) -> str:
    return user[1:].split(":", 1)[0]


_ERROR_SHAPE = ErrorShape("error", code="errcode")


def error(status: int, errcode: str, message: str, **extra: Any) -> Reply:
    """A Matrix error answer."""
    return _ERROR_SHAPE.reply(status, message, errcode, **extra)


def _ok(body: dict[str, Any] | None = None) -> Reply:
    return Reply(200, {} if body is None else body)


def _token(text: str | None) -> int | None:
    """A stream position from `s<N>`; None for no token; ValueError for another text."""
    if text is None or text == "":
        return None
    match = _TOKEN.fullmatch(text)
    if match is None:
        raise ValueError(text)
    return int(match.group(1))


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


@attrs.define(eq=False)
class _Event:
    pos: int  # its stream position
    room_id: str
    event_id: str
    type: str
    sender: str
    content: dict[str, Any]
    ts: int  # origin_server_ts, ms
    state_key: str | None = None
    redacts: str | None = None
    txn: tuple[str, str, str] | None = None  # (user, device, txnId) of a client's send

    def wire(self, *, room: bool = False, viewer: tuple[str, str] | None = None) -> dict[str, Any]:
        """As a client gets it: with `room_id` where the API gives it; with the
        transaction id for the device that sent it."""
        event: dict[str, Any] = {
            "type": self.type, "sender": self.sender, "content": copy_json(self.content),
            "event_id": self.event_id, "origin_server_ts": self.ts,
            "unsigned": {"age": max(0, int(time.time() * 1000) - self.ts)},
        }  # fmt: skip
        if self.state_key is not None:
            event["state_key"] = self.state_key
        if self.redacts is not None:
            event["redacts"] = self.redacts
        if room:
            event["room_id"] = self.room_id
        if self.txn is not None and viewer is not None and self.txn[:2] == viewer:
            event["unsigned"]["transaction_id"] = self.txn[2]
        return event

    def stripped(self) -> dict[str, Any]:
        """As stripped state (an invite's)."""
        return {"type": self.type, "state_key": self.state_key, "sender": self.sender,
                "content": copy_json(self.content)}  # fmt: skip


@attrs.define(eq=False)
class _Room:
    room_id: str
    events: list[_Event] = attrs.Factory(list)
    state: dict[tuple[str, str], _Event] = attrs.Factory(dict)

    def membership(self, user: str) -> str | None:
        member = self.state.get(("m.room.member", user))
        return None if member is None else member.content.get("membership")

    def members(self, *memberships: str) -> list[str]:
        """The users with one of `memberships`, in the order of their member events."""
        found = [
            e for (kind, _), e in self.state.items()
            if kind == "m.room.member" and e.content.get("membership") in memberships
        ]  # fmt: skip
        return [e.state_key for e in sorted(found, key=lambda e: e.pos) if e.state_key]

    @property
    def encrypted(self) -> bool:
        return ("m.room.encryption", "") in self.state

    def state_before(self, pos: int) -> list[_Event]:
        """The room's state just before the stream position `pos`."""
        state: dict[tuple[str, str], _Event] = {}
        for event in self.events:
            if event.pos >= pos:
                break
            if event.state_key is not None:
                state[(event.type, event.state_key)] = event
        return sorted(state.values(), key=lambda e: e.pos)

    def find(self, event_id: str) -> _Event | None:
        return next((e for e in self.events if e.event_id == event_id), None)


@attrs.define(eq=False)
class _Device:
    user_id: str
    device_id: str
    display_name: str | None = None
    keys: dict[str, Any] | None = None  # the device_keys uploaded
    one_time_keys: dict[str, Any] = attrs.Factory(dict)  # "alg:id" -> key, in upload order
    fallback_keys: dict[str, dict[str, Any]] = attrs.Factory(dict)  # alg -> {key_id, key, used}
    inbox: list[tuple[int, dict[str, Any]]] = attrs.Factory(list)  # to-device, not acked

    def counts(self) -> dict[str, int]:
        counts = {"signed_curve25519": 0}
        for key_id in self.one_time_keys:
            algorithm = key_id.split(":", 1)[0]
            counts[algorithm] = counts.get(algorithm, 0) + 1
        return counts

    def unused_fallback_types(self) -> list[str]:
        return sorted(alg for alg, key in self.fallback_keys.items() if not key["used"])

    def info(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id, "device_id": self.device_id,
            "display_name": self.display_name, "keys": self.keys,
            "one_time_keys": self.one_time_keys, "fallback_keys": self.fallback_keys,
            "to_device_pending": [event for _, event in self.inbox],
        }  # fmt: skip


@attrs.define
class _Call:
    verb: str
    endpoint: str
    path: str  # decoded, without the query
    args: list[str]
    query: dict[str, str]
    body: dict[str, Any]
    token: str = ""
    user: str = ""
    device: str = ""

    @property
    def room(self) -> str | None:
        """The room in the path, if the endpoint is one of a room's."""
        return self.args[0] if self.path.split("/")[4:5] == ["rooms"] and self.args else None


class FakeMatrix(Fake):
    name = "Matrix"
    _other_verbs = ("PUT",)
    _channel_field = "room"
    # For another process (bench/chat_matrix.py): `python -m tests.fakes.matrix`.
    _CONTROLS = frozenset({"add_user", "create_room", "message"})
    _STATE = ("sent", "syncs", "typing", "refused", "internal_errors")

    def __init__(
        self, *, timeline_limit: int = TIMELINE_LIMIT, port: int = 0, max_upload: int = MAX_UPLOAD
    ) -> None:
        """Users @hermes, @alice and @bob (test.local) exist, each with one device and token
        (HERMES_TOKEN / HERMES_DEVICE ...) and the password PASSWORD. `max_upload` (an
        attribute a test may change) is the largest upload taken, in bytes; so is
        `authenticated_media` (False: a homeserver older than Matrix 1.11, without the
        `/_matrix/client/v1/media/` endpoints, serving `/_matrix/media/v3/download`)."""
        super().__init__(port)
        self.timeline_limit = timeline_limit
        self.max_upload = max_upload
        self.authenticated_media = True
        self._media: dict[str, dict[str, Any]] = {}  # media id -> content, type, filename
        self._pos = 0  # the stream's last position
        self._last_ts = 0
        self._users: dict[str, str] = {}  # user id -> password
        self._tokens: dict[str, tuple[str, str]] = {}  # token -> (user, device)
        self._devices: dict[tuple[str, str], _Device] = {}
        self._rooms: dict[str, _Room] = {}
        self._aliases: dict[str, str] = {}
        self._account_data: dict[str, dict[str, tuple[int, dict[str, Any]]]] = {}
        self._device_changes: list[tuple[int, str]] = []
        self._txns: dict[tuple[str, str, str], dict[str, Any]] = {}  # -> the answer given
        self._limits: dict[tuple[str, str], int] = {}  # (user, room) -> timeline events
        self._hung = False
        self._held = 0
        self._filters = 0
        # records
        self._requests: list[dict[str, Any]] = []
        self._syncs: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []
        self._to_device_sent: list[dict[str, Any]] = []
        self._typing: list[dict[str, Any]] = []
        self._receipts: list[dict[str, Any]] = []
        self._claims: list[dict[str, Any]] = []
        self._uploads: list[dict[str, Any]] = []
        self._downloads: list[dict[str, Any]] = []
        for user, token, device in ((HERMES, HERMES_TOKEN, HERMES_DEVICE),
                                    (ALICE, ALICE_TOKEN, ALICE_DEVICE),
                                    (BOB, BOB_TOKEN, BOB_DEVICE)):  # fmt: skip
            self.add_user(user, token=token, device_id=device)

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """`{url}/_matrix/client/v3`: append `/sync` and so on."""
        return f"{self.url}/_matrix/client/v3"

    def close(self) -> None:
        """Stop serving: connections are shut at once, held syncs get no answer."""
        self._stop()

    # -- accounts -----------------------------------------------------------------------

    def add_user(
        self,
        user: str,
        *,
        password: str | None = None,
        token: str | None = None,
        device_id: str | None = None,
    ) -> str:
        """A user (a user id or a localpart) with one device and access token (made up
        when not given); returns the token. An existing user gets another device."""
        uid = user_id(user)
        with self._cond:
            if password is not None or uid not in self._users:  # another device keeps it
                self._users[uid] = password or PASSWORD
            return self._new_session(uid, device_id, None, token)

    def token_of(self, user: str) -> str:
        """A live access token of `user` (the first still valid); LookupError if none."""
        uid = user_id(user)
        with self._cond:
            for token, (owner, _) in self._tokens.items():
                if owner == uid:
                    return token
        raise LookupError(f"{uid} has no live access token")

    def revoke_token(self, token: str) -> None:
        """The token answers 401 M_UNKNOWN_TOKEN from now on, held syncs included."""
        with self._cond:
            if self._tokens.pop(token, None) is None:
                raise LookupError("no such access token")
            self._cond.notify_all()

    # -- rooms --------------------------------------------------------------------------

    def create_room(
        self,
        members: Iterable[str],
        name: str | None = None,
        encrypted: bool = False,
        direct: bool = False,
        *,
        invite: Iterable[str] = (),
        alias: str | None = None,
        public: bool = False,
        topic: str | None = None,
        room_id: str | None = None,
    ) -> str:
        """A room made by the first of `members` (the others join it at once), with the
        users of `invite` invited by the creator; returns its room id. `encrypted`: an
        `m.room.encryption` state event (megolm); `direct`: the invites say `is_direct`
        and every joined member's `m.direct` lists the room (as their clients would do);
        `public`: anyone may join; `alias`: `#alias:test.local`, joinable by name;
        `room_id`: the room's id (made up when not given)."""
        joined = [user_id(m) for m in members]
        invited = [user_id(m) for m in invite]
        if not joined:
            raise ValueError("a room needs at least its creator")
        with self._cond:
            for uid in joined + invited:
                self._known(uid)
            room = _Room(room_id or f"!{_random(string.ascii_letters, 18)}:{SERVER_NAME}")
            if room.room_id in self._rooms:
                raise ValueError(f"{room.room_id} exists")
            self._rooms[room.room_id] = room
            creator = joined[0]
            self._append(room, creator, "m.room.create",
                         {"creator": creator, "room_version": ROOM_VERSION}, "")  # fmt: skip
            self._append(room, creator, "m.room.member", self._member("join", creator), creator)
            self._append(room, creator, "m.room.power_levels", {
                "users": {creator: 100}, "users_default": 0, "events_default": 0,
                "state_default": 50, "ban": 50, "kick": 50, "redact": 50, "invite": 0,
            }, "")  # fmt: skip
            self._append(room, creator, "m.room.join_rules",
                         {"join_rule": "public" if public else "invite"}, "")  # fmt: skip
            self._append(room, creator, "m.room.history_visibility",
                         {"history_visibility": "shared"}, "")  # fmt: skip
            if name is not None:
                self._append(room, creator, "m.room.name", {"name": name}, "")
            if topic is not None:
                self._append(room, creator, "m.room.topic", {"topic": topic}, "")
            if alias is not None:
                full = alias if alias.startswith("#") else f"#{alias}:{SERVER_NAME}"
                self._aliases[full] = room.room_id
                self._append(room, creator, "m.room.canonical_alias", {"alias": full}, "")
            if encrypted:
                self._append(room, creator, "m.room.encryption", {
                    "algorithm": MEGOLM, "rotation_period_ms": 604800000,
                    "rotation_period_msgs": 100,
                }, "")  # fmt: skip
            for uid in joined[1:]:
                self._append(room, uid, "m.room.member", self._member("join", uid), uid)
            for uid in invited:
                content = self._member("invite", uid)
                if direct:
                    content["is_direct"] = True
                self._append(room, creator, "m.room.member", content, uid)
            if direct:
                for uid in joined:
                    current = copy_json(self._data(uid, "m.direct") or {})
                    for other in joined + invited:
                        if other != uid and room.room_id not in current.get(other, []):
                            current.setdefault(other, []).append(room.room_id)
                    self._set_data(uid, "m.direct", current)
            return room.room_id

    def invite(
        self, room: str, user: str = HERMES, sender: str | None = None, *, direct: bool = False
    ) -> dict[str, Any]:
        """`sender` (default the room's creator, who must be joined) invites `user`;
        returns the member event. It shows in the user's next sync's `rooms.invite`."""
        with self._cond:
            target = self._room(room)
            uid = self._known(user_id(user))
            by = user_id(sender) if sender else target.state[("m.room.create", "")].sender
            self._joined(target, by)
            if target.membership(uid) == "join":
                raise ValueError(f"{uid} is joined to {target.room_id} already")
            content = self._member("invite", uid)
            if direct:
                content["is_direct"] = True
            return self._append(target, by, "m.room.member", content, uid).wire(room=True)

    def join(self, room: str, user: str) -> dict[str, Any]:
        """`user` joins (invited or not: the test decides); returns the member event."""
        with self._cond:
            target = self._room(room)
            uid = self._known(user_id(user))
            event = self._append(target, uid, "m.room.member", self._member("join", uid), uid)
            return event.wire(room=True)

    def leave(self, room: str, user: str) -> dict[str, Any]:
        """`user` leaves (or declines an invite); returns the member event."""
        with self._cond:
            target = self._room(room)
            uid = user_id(user)
            event = self._append(target, uid, "m.room.member", {"membership": "leave"}, uid)
            return event.wire(room=True)

    def members(self, room: str, membership: str = "join") -> list[str]:
        """The users of a room with that membership now."""
        with self._cond:
            return self._room(room).members(membership)

    def timeline(self, room: str) -> list[dict[str, Any]]:
        """Every event of a room, oldest first, as /messages would give it."""
        with self._cond:
            return [e.wire(room=True) for e in self._room(room).events]

    def state_of(self, room: str, event_type: str, state_key: str = "") -> dict[str, Any] | None:
        """The content of a room's state event now (None: none)."""
        with self._cond:
            event = self._room(room).state.get((event_type, state_key))
            return None if event is None else copy_json(event.content)

    # -- events -------------------------------------------------------------------------

    def message(
        self,
        room: str,
        sender: str,
        body: str,
        *,
        thread: str | None = None,
        reply_to: str | None = None,
        replaces: str | None = None,
        mentions: Iterable[str] | None = None,
        **content_extra: Any,
    ) -> dict[str, Any]:
        """An `m.room.message` (m.text) from `sender` (who must be joined); returns the
        event (with `event_id`, `origin_server_ts`, `room_id`). `thread`: in the thread
        of that root (`rel_type: m.thread`, falling back to a reply to the thread's last
        event unless `reply_to` names one); `reply_to`: `m.in_reply_to`; `replaces`: an
        edit of that event (`m.new_content`, body "* ..."); `mentions`: `m.mentions`
        with those user ids. `content_extra` is merged in last (`**{"m.x": ...}` for a
        dotted key)."""
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        with self._cond:
            target = self._room(room)
            if thread is not None:
                last = reply_to or self._thread_last(target, thread)
                content["m.relates_to"] = {
                    "rel_type": "m.thread", "event_id": thread,
                    "is_falling_back": reply_to is None, "m.in_reply_to": {"event_id": last},
                }  # fmt: skip
            elif replaces is not None:
                content["body"] = f"* {body}"
                content["m.new_content"] = {"msgtype": "m.text", "body": body}
                content["m.relates_to"] = {"rel_type": "m.replace", "event_id": replaces}
            elif reply_to is not None:
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
            if mentions is not None:
                content["m.mentions"] = {"user_ids": [user_id(m) for m in mentions]}
            content.update(content_extra)
            return self.event(room, sender, "m.room.message", content)

    def event(
        self,
        room: str,
        sender: str,
        type: str,  # noqa: A002 - Matrix's name
        content: dict[str, Any],
        state_key: str | None = None,
        *,
        redacts: str | None = None,
    ) -> dict[str, Any]:
        """Any event (a reaction, a redaction with `redacts`, an `m.room.encrypted`, a
        state event with `state_key`) from `sender`, who must be joined unless it is a
        member event; returns it."""
        with self._cond:
            target = self._room(room)
            uid = user_id(sender)
            if type != "m.room.member":
                self._joined(target, uid)
            return self._append(target, uid, type, content, state_key,
                                redacts=redacts).wire(room=True)  # fmt: skip

    def set_account_data(self, user: str, type: str, content: dict[str, Any]) -> None:  # noqa: A002
        """The user's global account data `type` (m.direct ...) is now `content`."""
        with self._cond:
            self._set_data(self._known(user_id(user)), type, content)

    def account_data(self, user: str, type: str) -> dict[str, Any] | None:  # noqa: A002
        with self._cond:
            return copy_json(self._data(user_id(user), type))

    def to_device(
        self,
        user: str,
        device: str,
        type: str,  # noqa: A002
        content: dict[str, Any],
        sender: str = ALICE,
    ) -> dict[str, Any]:
        """A to-device message from `sender` to `device` of `user` (`*`: all of them), in
        its next sync's `to_device.events`; returns the event."""
        event = {"sender": user_id(sender), "type": type, "content": copy_json(content)}
        with self._cond:
            if not self._deliver(user_id(user), device, event):
                raise LookupError(f"{user_id(user)} has no device {device}")
        return event

    # -- media --------------------------------------------------------------------------

    def add_media(
        self,
        content: bytes,
        content_type: str = "application/octet-stream",
        filename: str | None = None,
    ) -> str:
        """A file in the media repository, as an upload would leave it; its `mxc://` URI."""
        with self._cond:
            return self._store_media(content, content_type, filename, None)

    def media_content(self, mxc: str) -> bytes:
        """The bytes stored under `mxc` (an upload's, whatever its size)."""
        with self._cond:
            return self._media[_media_id(mxc)]["content"]

    # -- the sync's shape, faults ------------------------------------------------------------

    def limit_timeline(self, room: str, n: int, user: str = HERMES) -> None:
        """The next sync of `user` that shows `room` (joined before its `since`) with new
        events shows only the last `n` of them, `limited: true`, a `prev_batch` to page
        back from, and the state events of the gap in `state`."""
        with self._cond:
            self._limits[(user_id(user), self._room(room).room_id)] = int(n)

    def hang_syncs(self) -> None:
        """As behind a dead path: syncs arrive (and count, and are held) but get no
        answer until `unhang_syncs()`."""
        self._change(_hung=True)

    def unhang_syncs(self) -> None:
        """Held syncs go on as if they had just arrived (answered at once if there is
        something new or their timeout has passed)."""
        self._change(_hung=False)

    def fail(
        self,
        status: int = 500,
        *,
        endpoint: str = "send",
        room: str | None = None,
        errcode: str | None = None,
        message: str | None = None,
        retry_after_ms: int | None = None,
        times: int | None = 1,
    ) -> None:
        """The next `times` calls (None: all) of `endpoint` ("send", "sync",
        "sendToDevice", "keys/claim", "join", ... or "*"; the names in `requests`), in
        `room` if given (an endpoint under rooms/{roomId}/), answer
        `status` with `errcode` (default by status: 429 M_LIMIT_EXCEEDED, 403
        M_FORBIDDEN, 404 M_NOT_FOUND, else M_UNKNOWN). A 429 carries `retry_after_ms`
        (default 1000) in its body and `Retry-After` (whole seconds, rounded up). A send
        refused is not remembered: the same txnId later is a new send."""
        code = errcode or _ERRCODES.get(status, "M_UNKNOWN")
        if status == 429 and retry_after_ms is None:
            retry_after_ms = 1000
        extra: dict[str, Any] = {}
        if retry_after_ms is not None:
            extra = {"retry_after_ms": int(retry_after_ms)}
            extra["retry_after"] = math.ceil(retry_after_ms / 1000)
        reply = error(status, code, message or _ERRORS.get(code, code), **extra)
        with self._cond:
            self._faults.add(reply, endpoint, room, times)

    # -- observing ----------------------------------------------------------------------

    requests = observed("_requests", """Every request, in order: `method`, `path` (decoded, no
        query), `endpoint` (the route's name, None if none), `query` (a dict), `body` (the
        JSON, None if none or not JSON), `user` and `device_id` of its token (None if
        none or unknown), `status` (None while held), `at`.""")  # fmt: skip
    sent = observed("_sent", """The room events clients sent (send and redact), in order:
        `room`, `type`, `content`, `txn_id`, `event_id`, `sender`, `device_id`,
        `encrypted_room` (whether the room had m.room.encryption then), `redacts` (a
        redaction's target, else None), `at`. A repeated txnId adds nothing.""")  # fmt: skip
    refused = observed("_refused", """Calls answered by a fault of `fail()`: `endpoint`,
        `room`, `status`, `errcode`, `retry_after_ms`, `user`, `path`, `body`,
        `at`.""")  # fmt: skip
    rate_limited = observed(
        "_refused",
        "How many calls were answered 429.",
        lambda refused: sum(1 for r in refused if r["status"] == 429),
    )
    to_device_sent = observed("_to_device_sent", """The sendToDevice messages taken, one per
        (user, device) named: `type`, `txn_id`, `sender`, `sender_device`, `user`,
        `device_id` (as named, `*` too), `content`, `delivered` (how many devices got
        it), `at`.""")  # fmt: skip
    typing = observed("_typing", "Typing notices: `room`, `user`, `typing`, `timeout`, `at`.")
    receipts = observed("_receipts", """Receipts: `room`, `receipt_type`, `event_id`,
        `thread_id`, `user`, `at`.""")  # fmt: skip
    uploads = observed("_uploads", """Uploads taken (`POST /_matrix/media/v3/upload`): `mxc`,
        `user`, `device_id`, `content_type`, `filename` (None: none given), `size`,
        `sha256` (hex), `content` (the bytes, when at most 1 MiB, else None), `at`.""")  # fmt: skip
    downloads = observed("_downloads", """Media served: `mxc`, `user` (None: the legacy
        endpoint, without a token), `authenticated` (the client v1 endpoint), `size`,
        `at`.""")  # fmt: skip
    claims = observed("_claims", """Keys claimed: `by`, `user`, `device_id`, `algorithm`,
        `key_id`, `fallback` (whether it was the fallback key), `at`.""")  # fmt: skip
    syncs = observed("_syncs", """Every /sync, in order of arrival: `user`, `device_id`,
        `since`, `timeout` (ms), `full_state`, `next_batch` (None until answered),
        `at`.""")  # fmt: skip
    held_syncs = observed("_held", "Syncs waiting now (held for news, or hung).")
    devices = observed("_devices", """Every device: `user_id`, `device_id`, `display_name`,
        `keys` (the device keys uploaded, None: none), `one_time_keys` left,
        `fallback_keys` (alg -> key_id, key, used), `to_device_pending`.""",
        lambda devices: copy_json(infos(list(devices.values()))))  # fmt: skip

    @property
    def stream_token(self) -> str:
        """The `next_batch` a sync would answer now."""
        with self._cond:
            return f"s{self._pos}"

    def wait_sent(
        self, count: int = 1, timeout: float = 10.0, *, room: str | None = None
    ) -> list[dict[str, Any]]:
        """The events sent (in `room` if given), once at least `count` were."""
        where = "" if room is None else f" in {room}"
        return self._wait_records("_sent", count, timeout, f"{count} event(s) sent{where}",
                                  lambda s: room in (None, s["room"]))  # fmt: skip

    def wait_syncs(
        self, count: int, timeout: float = 10.0, *, user: str | None = None
    ) -> list[dict[str, Any]]:
        """The syncs (of `user` if given), once at least `count` arrived."""
        uid = None if user is None else user_id(user)
        return self._wait_records("_syncs", count, timeout, f"{count} sync(s)",
                                  lambda s: uid in (None, s["user"]))  # fmt: skip

    def wait_held_syncs(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until at least `count` syncs are held now."""
        self._wait(lambda: self._held >= count, timeout, f"{count} held sync(s)")

    def wait_refused(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_refused", count, timeout, f"{count} refused call(s)")

    def wait_to_device_sent(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        return self._wait_records("_to_device_sent", count, timeout,
                                  f"{count} to-device message(s) sent")  # fmt: skip

    def wait_uploads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The uploads taken, once at least `count` were."""
        return self._wait_records("_uploads", count, timeout, f"{count} upload(s)")

    def wait_downloads(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The media served, once at least `count` were."""
        return self._wait_records("_downloads", count, timeout, f"{count} download(s)")

    # -- internals (called holding the lock) -------------------------------------------------

    def _bump(self) -> int:
        self._pos += 1
        self._cond.notify_all()
        return self._pos

    def _known(self, uid: str) -> str:
        if uid not in self._users:
            raise LookupError(f"no user {uid}: add_user() it first")
        return uid

    def _room(self, room: str) -> _Room:
        found = self._rooms.get(self._aliases.get(room, room))
        if found is None:
            raise LookupError(f"no room {room}")
        return found

    def _joined(self, room: _Room, uid: str) -> None:
        if room.membership(uid) != "join":
            raise ValueError(f"{uid} is not joined to {room.room_id}")

    def _member(self, membership: str, uid: str) -> dict[str, Any]:
        return {"membership": membership, "displayname": localpart(uid)}

    def _new_session(
        self, uid: str, device_id: str | None, display_name: str | None, token: str | None = None
    ) -> str:
        device_id = device_id or _random(string.ascii_uppercase, 10)
        key = (uid, device_id)
        if key in self._devices:  # the device again: its earlier tokens go
            for old in [t for t, who in self._tokens.items() if who == key]:
                del self._tokens[old]
        else:
            self._devices[key] = _Device(uid, device_id, display_name)
        token = token or f"syt_{_random(string.ascii_letters + string.digits, 32)}"
        self._tokens[token] = key
        self._cond.notify_all()
        return token

    def _append(
        self,
        room: _Room,
        sender: str,
        type: str,  # noqa: A002
        content: dict[str, Any],
        state_key: str | None = None,
        *,
        redacts: str | None = None,
        txn: tuple[str, str, str] | None = None,
    ) -> _Event:
        self._last_ts = max(int(time.time() * 1000), self._last_ts + 1)
        event_id = f"${_random(string.ascii_letters, 43)}"
        event = _Event(self._bump(), room.room_id, event_id, type, sender, copy_json(content),
                       self._last_ts, state_key, redacts, txn)  # fmt: skip
        room.events.append(event)
        if state_key is not None:
            room.state[(type, state_key)] = event
        if type == "m.room.redaction" and redacts:
            target = room.find(redacts)
            if target is not None and target.state_key is None:
                target.content = {}
        return event

    def _thread_last(self, room: _Room, root: str) -> str:
        last = root
        for event in room.events:
            relation = event.content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.thread" and relation.get("event_id") == root:
                last = event.event_id
        return last

    def _data(self, uid: str, type: str) -> dict[str, Any] | None:  # noqa: A002
        found = self._account_data.get(uid, {}).get(type)
        return None if found is None else found[1]

    def _set_data(self, uid: str, type: str, content: dict[str, Any]) -> None:  # noqa: A002
        self._account_data.setdefault(uid, {})[type] = (self._bump(), copy_json(content))

    def _deliver(self, uid: str, device: str, event: dict[str, Any]) -> int:
        """A to-device event into the inbox of each device named; how many got it."""
        targets = [d for (u, d_id), d in self._devices.items()
                   if u == uid and device in ("*", d_id)]  # fmt: skip
        for target in targets:
            target.inbox.append((self._bump(), copy_json(event)))
        return len(targets)

    def _store_media(
        self, content: bytes, content_type: str, filename: str | None, by: tuple[str, str] | None
    ) -> str:
        media_id = _random(string.ascii_letters, 24)
        self._media[media_id] = {"content": bytes(content), "content_type": content_type,
                                 "filename": filename}  # fmt: skip
        mxc = f"mxc://{SERVER_NAME}/{media_id}"
        if by is not None:
            self._uploads.append({
                "mxc": mxc, "user": by[0], "device_id": by[1], "content_type": content_type,
                "filename": filename, "size": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
                "content": bytes(content) if len(content) <= KEPT_UPLOAD else None,
                "at": time.monotonic(),
            })  # fmt: skip
        self._cond.notify_all()
        return mxc

    def _device_changed(self, uid: str) -> None:
        self._device_changes.append((self._bump(), uid))

    def _sharing(self, uid: str, *, encrypted: bool = False) -> set[str]:
        """The users joined to a room `uid` is joined to (an encrypted one if asked)."""
        users = {uid}
        for room in self._rooms.values():
            if room.membership(uid) == "join" and (room.encrypted or not encrypted):
                users.update(room.members("join"))
        return users

    # -- serving (handler threads) ---------------------------------------------------------

    def _internal_error(self) -> Reply:
        return error(500, "M_UNKNOWN", "Internal server error")

    def _handle(self, request: TrackedHandler, raw: bytes) -> Reply | None:
        segments = [unquote(s) for s in urlsplit(request.path).path.split("/")]
        asked = query(request.path)
        try:  # an upload's bytes are a file, not JSON
            parsed: Any = json.loads(raw) if raw and not _is_media(segments) else None
        except ValueError:
            parsed = None
        record: dict[str, Any] = {
            "method": request.command, "path": "/".join(segments), "endpoint": None,
            "query": asked, "body": parsed, "user": None, "device_id": None, "status": None,
            "at": time.monotonic(),
        }  # fmt: skip
        with self._cond:
            self._requests.append(record)
            self._cond.notify_all()
        reply = self._dispatch(request, record, segments, asked, raw, parsed)
        with self._cond:
            record["status"] = None if reply is None else reply.status
            self._cond.notify_all()
        return reply

    def _dispatch(
        self,
        request: TrackedHandler,
        record: dict[str, Any],
        segments: list[str],
        query: dict[str, str],
        raw: bytes,
        parsed: Any,
    ) -> Reply | None:
        if _is_media(segments):
            return self._media_call(request, record, segments, query, raw)
        if segments[:3] != ["", "_matrix", "client"] or len(segments) < 4:
            return error(404, "M_UNRECOGNIZED", "Unrecognized request")
        if segments[3:] == ["versions"] and request.command == "GET":
            return _ok({"versions": VERSIONS, "unstable_features": {}})
        if segments[3] not in ("v3", "r0"):
            return error(404, "M_UNRECOGNIZED", "Unrecognized request")
        path = "/" + "/".join(urlsplit(request.path).path.split("/")[4:])
        found = match(_ROUTES, request.command, path)
        if isinstance(found, int):  # 404 no such path, 405 the path with another verb
            return error(found, "M_UNRECOGNIZED", "Unrecognized request")
        endpoint, args = found[0], list(found[1].values())
        record["endpoint"] = endpoint
        call = _Call(request.command, endpoint, "/".join(segments), args, query, {})
        if request.command in _BODY_VERBS:
            if raw and parsed is None:
                return error(400, "M_NOT_JSON", "Content not JSON.")
            if parsed is not None and not isinstance(parsed, dict):
                return error(400, "M_BAD_JSON", "Content must be a JSON object.")
            call.body = parsed or {}
        if endpoint not in _NO_AUTH:
            refusal = self._authenticate(request, record, call)
            if refusal is not None:
                return refusal
        if endpoint not in ("send", "redact", "sendToDevice", "sync"):  # these: their own time
            refusal = self._fault(call)
            if refusal is not None:
                return refusal
        handler = getattr(self, "_api_" + endpoint.replace("/", "_"))
        return handler(call)

    def _authenticate(
        self, request: TrackedHandler, record: dict[str, Any], call: _Call
    ) -> Reply | None:
        """The call's user and device from its token; a 401 when it has none that lives."""
        call.token = bearer(request.headers) or call.query.get("access_token", "")
        if not call.token:
            return error(401, "M_MISSING_TOKEN", "Missing access token")
        with self._cond:
            who = self._tokens.get(call.token)
            if who is None:
                return error(401, "M_UNKNOWN_TOKEN", "Unrecognised access token",
                             soft_logout=False)  # fmt: skip
            call.user, call.device = who
            record["user"], record["device_id"] = who
        return None

    # media

    def _media_call(
        self,
        request: TrackedHandler,
        record: dict[str, Any],
        segments: list[str],
        query: dict[str, str],
        raw: bytes,
    ) -> Reply:
        """The media repository: uploads under `/_matrix/media/v3/`, downloads under
        `/_matrix/client/v1/media/` with a token (or, without `authenticated_media`, under
        `/_matrix/media/v3/` without one)."""
        verb = request.command
        authenticated = segments[2] == "client"
        rest = segments[5:] if authenticated else segments[4:]
        version = segments[3]
        if authenticated and not self.authenticated_media:
            return error(404, "M_UNRECOGNIZED", "Unrecognized request")
        if (authenticated and version != "v1") or (not authenticated
                                                   and version not in ("v3", "r0")):  # fmt: skip
            return error(404, "M_UNRECOGNIZED", "Unrecognized request")
        if rest == ["upload"] and not authenticated:
            endpoint = "upload"
        elif rest == ["config"]:
            endpoint = "media_config"
        elif rest[:1] == ["download"] and len(rest) in (3, 4):
            endpoint = "download"
        else:
            return error(404, "M_UNRECOGNIZED", "Unrecognized request")
        wanted = "POST" if endpoint == "upload" else "GET"
        if verb != wanted:
            return error(405, "M_UNRECOGNIZED", "Unrecognized request")
        record["endpoint"] = endpoint
        call = _Call(verb, endpoint, "/".join(segments), rest[1:3], query, {})
        legacy_download = endpoint == "download" and not authenticated
        if not legacy_download:
            refusal = self._authenticate(request, record, call)
            if refusal is not None:
                return refusal
        refusal = self._fault(call)
        if refusal is not None:
            return refusal
        if endpoint == "media_config":
            return _ok({"m.upload.size": self.max_upload})
        if endpoint == "upload":
            return self._upload(request, call, raw)
        return self._download(call, authenticated)

    def _upload(self, request: TrackedHandler, call: _Call, raw: bytes) -> Reply:
        if request.headers.get("content-length") is None:  # as Synapse: no chunked uploads
            request.close_connection = True
            return error(400, "M_UNKNOWN", "Request must specify a Content-Length")
        if len(raw) > self.max_upload:
            return error(413, "M_TOO_LARGE", "Upload request body is too large")
        kind = request.headers.get("content-type") or "application/octet-stream"
        with self._cond:
            mxc = self._store_media(raw, kind, call.query.get("filename"),
                                    (call.user, call.device))  # fmt: skip
        return _ok({"content_uri": mxc})

    def _download(self, call: _Call, authenticated: bool) -> Reply:
        server, media_id = call.args
        with self._cond:
            found = self._media.get(media_id) if server == SERVER_NAME else None
            if found is None or (not authenticated and self.authenticated_media):
                return error(404, "M_NOT_FOUND", "Not found")  # new media: authenticated only
            content = found["content"]
            self._downloads.append({
                "mxc": f"mxc://{server}/{media_id}", "user": call.user or None,
                "authenticated": authenticated, "size": len(content), "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
        headers = [("Content-Disposition", "attachment; filename*=utf-8''"
                    + quote(found["filename"] or media_id, safe=""))]  # fmt: skip
        return Reply(200, content, headers, found["content_type"])

    def _fault(self, call: _Call, txn_id: str | None = None) -> Reply | None:
        """The fault `fail()` set for this call, recorded; None: none."""
        with self._cond:
            fault = self._faults.take(call.endpoint, call.room)
            if fault is None:
                return None
            self._refused.append({
                "endpoint": call.endpoint, "room": call.room, "status": fault.status,
                "errcode": fault.body["errcode"], "retry_after_ms":
                fault.body.get("retry_after_ms"), "user": call.user, "path": call.path,
                "txn_id": txn_id, "body": copy_json(call.body), "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
            return fault

    def _room_call(self, call: _Call, *, member: bool = True) -> _Room | Reply:
        """The room of a room's endpoint; 404 unknown; 403 when the caller is not joined
        (`member`)."""
        room = self._rooms.get(call.args[0])
        if room is None:
            return error(404, "M_NOT_FOUND", f"Unknown room {call.args[0]}")
        if member and room.membership(call.user) != "join":
            return error(403, "M_FORBIDDEN", f"User {call.user} not in room {room.room_id}")
        return room

    # accounts

    def _api_whoami(self, call: _Call) -> Reply:
        return _ok({"user_id": call.user, "device_id": call.device, "is_guest": False})

    def _api_login_flows(self, call: _Call) -> Reply:
        return _ok({"flows": [{"type": "m.login.password"}]})

    def _api_login(self, call: _Call) -> Reply:
        body = call.body
        if body.get("type") != "m.login.password":
            return error(400, "M_UNKNOWN", "Unknown login type")
        identifier = body.get("identifier") or {}
        name = identifier.get("user") if identifier.get("type") == "m.id.user" else None
        name = name or body.get("user")
        if not isinstance(name, str) or not name:
            return error(400, "M_INVALID_PARAM", "Invalid login submission")
        uid = user_id(name)
        with self._cond:
            if self._users.get(uid) != body.get("password"):
                return error(403, "M_FORBIDDEN", "Invalid username or password")
            device_id = body.get("device_id")
            token = self._new_session(uid, device_id if isinstance(device_id, str) else None,
                                      body.get("initial_device_display_name"))  # fmt: skip
            _, device = self._tokens[token]
        return _ok({"user_id": uid, "access_token": token, "device_id": device,
                    "home_server": SERVER_NAME})  # fmt: skip

    def _api_logout(self, call: _Call) -> Reply:
        with self._cond:
            self._tokens.pop(call.token, None)
            key = (call.user, call.device)
            if key not in self._tokens.values():
                self._devices.pop(key, None)
                self._device_changed(call.user)
            self._cond.notify_all()
        return _ok()

    # rooms

    def _api_join(self, call: _Call) -> Reply:
        with self._cond:
            target = self._aliases.get(call.args[0], call.args[0])
            room = self._rooms.get(target)
            if room is None:
                return error(404, "M_NOT_FOUND", f"No room {call.args[0]}")
            membership = room.membership(call.user)
            if membership != "join":
                rule = room.state.get(("m.room.join_rules", ""))
                public = rule is not None and rule.content.get("join_rule") == "public"
                if membership == "ban" or (membership != "invite" and not public):
                    return error(403, "M_FORBIDDEN", "You are not invited to this room.")
                self._append(room, call.user, "m.room.member",
                             self._member("join", call.user), call.user)  # fmt: skip
            return _ok({"room_id": room.room_id})

    def _api_leave(self, call: _Call) -> Reply:
        with self._cond:
            room = self._room_call(call, member=False)
            if isinstance(room, Reply):
                return room
            if room.membership(call.user) not in ("join", "invite"):
                return error(403, "M_FORBIDDEN", f"User {call.user} not in room")
            self._append(room, call.user, "m.room.member", {"membership": "leave"}, call.user)
            return _ok()

    def _api_joined_members(self, call: _Call) -> Reply:
        with self._cond:
            room = self._room_call(call)
            if isinstance(room, Reply):
                return room
            joined = {}
            for uid in room.members("join"):
                content = room.state[("m.room.member", uid)].content
                fields = (("display_name", "displayname"), ("avatar_url", "avatar_url"))
                joined[uid] = {k: content[v] for k, v in fields if content.get(v) is not None}
            return _ok({"joined": joined})

    def _api_joined_rooms(self, call: _Call) -> Reply:
        with self._cond:
            rooms = [r.room_id for r in self._rooms.values() if r.membership(call.user) == "join"]
            return _ok({"joined_rooms": rooms})

    def _api_state(self, call: _Call) -> Reply:
        with self._cond:
            room = self._room_call(call)
            if isinstance(room, Reply):
                return room
            if len(call.args) == 1:
                events = sorted(room.state.values(), key=lambda e: e.pos)
                return Reply(200, [e.wire(room=True) for e in events])
            key = (call.args[1], call.args[2] if len(call.args) > 2 else "")
            event = room.state.get(key)
            if event is None:
                return error(404, "M_NOT_FOUND", "Event not found.")
            return _ok(copy_json(event.content))

    def _api_messages(self, call: _Call) -> Reply:
        direction = call.query.get("dir")
        if direction not in ("b", "f"):
            return error(400, "M_INVALID_PARAM", "dir must be b or f")
        try:
            start, stop = _token(call.query.get("from")), _token(call.query.get("to"))
            limit = max(0, int(call.query.get("limit", PAGE_LIMIT)))
        except ValueError:
            return error(400, "M_INVALID_PARAM", "Invalid token or limit")
        with self._cond:
            room = self._room_call(call, member=False)
            if isinstance(room, Reply):
                return room
            member = room.state.get(("m.room.member", call.user))
            membership = None if member is None else member.content.get("membership")
            if membership not in ("join", "leave"):
                return error(403, "M_FORBIDDEN", f"User {call.user} not in room")
            visible = [e for e in room.events
                       if membership == "join" or e.pos <= member.pos]  # fmt: skip
            viewer = (call.user, call.device)
            if direction == "b":
                start = self._pos if start is None else start
                candidates = [e for e in reversed(visible)
                              if e.pos <= start and (stop is None or e.pos > stop)]  # fmt: skip
            else:
                start = 0 if start is None else start
                candidates = [e for e in visible
                              if e.pos > start and (stop is None or e.pos <= stop)]  # fmt: skip
            chunk = candidates[:limit]
            answer: dict[str, Any] = {
                "start": call.query.get("from") or f"s{start}",
                "chunk": [e.wire(room=True, viewer=viewer) for e in chunk], "state": [],
            }  # fmt: skip
            if chunk and len(candidates) > len(chunk):
                last = chunk[-1].pos
                answer["end"] = f"s{last - 1}" if direction == "b" else f"s{last}"
            return _ok(answer)

    def _api_account_data(self, call: _Call) -> Reply:
        owner, kind = call.args
        if owner != call.user:
            return error(403, "M_FORBIDDEN", "Cannot access account data for other users.")
        with self._cond:
            if call.verb == "PUT":
                self._set_data(owner, kind, call.body)
                return _ok()
            content = self._data(owner, kind)
            if content is None:
                return error(404, "M_NOT_FOUND", "Account data not found")
            return _ok(copy_json(content))

    def _api_typing(self, call: _Call) -> Reply:
        if call.args[1] != call.user:
            return error(403, "M_FORBIDDEN", "Cannot set another user's typing state")
        if not isinstance(call.body.get("typing"), bool):
            return error(400, "M_BAD_JSON", "typing must be a boolean")
        with self._cond:
            room = self._room_call(call)
            if isinstance(room, Reply):
                return room
            self._typing.append({
                "room": room.room_id, "user": call.user, "typing": call.body["typing"],
                "timeout": call.body.get("timeout"), "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
            return _ok()

    def _api_receipt(self, call: _Call) -> Reply:
        with self._cond:
            room = self._room_call(call)
            if isinstance(room, Reply):
                return room
            self._receipts.append({
                "room": room.room_id, "receipt_type": call.args[1], "event_id": call.args[2],
                "thread_id": call.body.get("thread_id"), "user": call.user,
                "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
            return _ok()

    def _api_filter(self, call: _Call) -> Reply:
        if call.args[0] != call.user:
            return error(403, "M_FORBIDDEN", "Cannot create filters for other users")
        with self._cond:
            self._filters += 1
            return _ok({"filter_id": str(self._filters)})

    # sending

    def _api_send(self, call: _Call) -> Reply:
        room_id, event_type, txn_id = call.args
        return self._send(call, txn_id, event_type, call.body, None)

    def _api_redact(self, call: _Call) -> Reply:
        room_id, target, txn_id = call.args
        content = {k: v for k, v in call.body.items() if k == "reason"}
        return self._send(call, txn_id, "m.room.redaction", content, target)

    def _send(
        self,
        call: _Call,
        txn_id: str,
        event_type: str,
        content: dict[str, Any],
        redacts: str | None,
    ) -> Reply:
        key = (call.user, call.device, call.path)
        with self._cond:
            done = self._txns.get(key)
            if done is not None:
                return _ok(copy_json(done))
            refusal = self._fault(call, txn_id)
            if refusal is not None:
                return refusal
            room = self._room_call(call)
            if isinstance(room, Reply):
                return room
            event = self._append(room, call.user, event_type, content, redacts=redacts,
                                 txn=(call.user, call.device, txn_id))  # fmt: skip
            self._txns[key] = {"event_id": event.event_id}
            self._sent.append({
                "room": room.room_id, "type": event_type, "content": copy_json(content),
                "txn_id": txn_id, "event_id": event.event_id, "sender": call.user,
                "device_id": call.device, "encrypted_room": room.encrypted,
                "redacts": redacts, "at": time.monotonic(),
            })  # fmt: skip
            self._cond.notify_all()
            return _ok({"event_id": event.event_id})

    # sync

    def _api_sync(self, call: _Call) -> Reply | None:
        try:
            since = _token(call.query.get("since"))
            timeout = max(0, int(float(call.query.get("timeout") or 0)))
        except ValueError:
            return error(400, "M_INVALID_PARAM", "Invalid since token or timeout")
        full_state = call.query.get("full_state", "false").lower() == "true"
        with self._cond:
            record = {
                "user": call.user, "device_id": call.device, "since": call.query.get("since"),
                "timeout": timeout, "full_state": full_state, "next_batch": None,
                "at": time.monotonic(),
            }  # fmt: skip
            self._syncs.append(record)
            self._cond.notify_all()
            refusal = self._fault(call)
            if refusal is not None:
                return refusal
            device = self._devices[(call.user, call.device)]
            if since is not None:  # acknowledges the to-device events it was answered with
                device.inbox = [(pos, event) for pos, event in device.inbox if pos > since]
            deadline = time.monotonic() + timeout / 1000
            self._held += 1
            self._cond.notify_all()
            try:
                while True:
                    if self._closing:
                        return None
                    if call.token not in self._tokens:
                        return error(401, "M_UNKNOWN_TOKEN", "Unrecognised access token",
                                     soft_logout=False)  # fmt: skip
                    if self._hung:
                        self._cond.wait()
                        continue
                    body, news, limits = self._sync_body(call.user, device, since, full_state)
                    left = deadline - time.monotonic()
                    if news or since is None or full_state or left <= 0:
                        for used in limits:
                            self._limits.pop(used, None)
                        record["next_batch"] = body["next_batch"]
                        return Reply(200, body)
                    self._cond.wait(left)
            finally:
                self._held -= 1
                self._cond.notify_all()

    def _sync_body(
        self, uid: str, device: _Device, since: int | None, full_state: bool
    ) -> tuple[dict[str, Any], bool, list[tuple[str, str]]]:
        """The sync answer now, whether it holds anything new, the timeline limits used."""
        viewer = (uid, device.device_id)
        joined: dict[str, Any] = {}
        invited: dict[str, Any] = {}
        left: dict[str, Any] = {}
        used: list[tuple[str, str]] = []
        for room in self._rooms.values():
            member = room.state.get(("m.room.member", uid))
            membership = None if member is None else member.content.get("membership")
            if member is None:
                continue
            if membership == "join":
                entry = self._joined_room(room, uid, viewer, since, full_state, member.pos, used)
                if entry is not None:
                    joined[room.room_id] = entry
            elif membership == "invite" and (since is None or member.pos > since):
                shown = [room.state[(kind, "")] for kind in _INVITE_STATE
                         if (kind, "") in room.state]  # fmt: skip
                inviter = room.state.get(("m.room.member", member.sender))
                if inviter is not None and member.sender != uid:
                    shown.append(inviter)
                shown.append(member)
                invited[room.room_id] = {"invite_state": {"events": [e.stripped()
                                                                     for e in shown]}}  # fmt: skip
            elif membership in ("leave", "ban") and since is not None and member.pos > since:
                before = {(e.type, e.state_key): e for e in room.state_before(member.pos)}
                prior = before.get(("m.room.member", uid))
                was_joined = prior is not None and prior.content.get("membership") == "join"
                events = [e for e in room.events if since < e.pos <= member.pos
                          and (was_joined or e is member)]  # fmt: skip
                left[room.room_id] = {
                    "timeline": {"events": [e.wire(viewer=viewer) for e in events],
                                 "limited": False, "prev_batch": f"s{since}"},
                    "state": {"events": []}, "account_data": {"events": []},
                }  # fmt: skip
        data = [{"type": kind, "content": copy_json(content)}
                for kind, (pos, content) in self._account_data.get(uid, {}).items()
                if since is None or pos > since]  # fmt: skip
        to_device = [copy_json(event) for _, event in device.inbox]
        lists = self._device_lists(uid, since)
        body = {
            "next_batch": f"s{self._pos}",
            "rooms": {"join": joined, "invite": invited, "leave": left, "knock": {}},
            "account_data": {"events": data},
            "presence": {"events": []},
            "to_device": {"events": to_device},
            "device_lists": lists,
            "device_one_time_keys_count": device.counts(),
            "device_unused_fallback_key_types": device.unused_fallback_types(),
        }
        news = bool(joined or invited or left or data or to_device or lists["changed"]
                    or lists["left"])  # fmt: skip
        return body, news, used

    def _joined_room(
        self,
        room: _Room,
        uid: str,
        viewer: tuple[str, str],
        since: int | None,
        full_state: bool,
        joined_at: int,
        used: list[tuple[str, str]],
    ) -> dict[str, Any] | None:
        newly = since is None or joined_at > since
        if newly:
            timeline = room.events[-self.timeline_limit :] if self.timeline_limit > 0 else []
            limited = len(timeline) < len(room.events)
        else:
            assert since is not None
            timeline = [e for e in room.events if e.pos > since]
            limit = self._limits.get((uid, room.room_id))
            limited = limit is not None and bool(timeline)
            if limited:
                assert limit is not None
                timeline = timeline[-limit:] if limit > 0 else []
                used.append((uid, room.room_id))
        start = timeline[0].pos if timeline else self._pos + 1
        if newly or full_state:
            state = room.state_before(start)
        elif limited:
            assert since is not None
            gap: dict[tuple[str, str | None], _Event] = {}
            for event in room.events:
                if since < event.pos < start and event.state_key is not None:
                    gap[(event.type, event.state_key)] = event
            state = sorted(gap.values(), key=lambda e: e.pos)
        else:
            state = []
        if not (newly or full_state or timeline or state):
            return None
        heroes = [u for u in room.members("join", "invite") if u != uid][:5]
        return {
            "summary": {"m.heroes": heroes, "m.joined_member_count": len(room.members("join")),
                        "m.invited_member_count": len(room.members("invite"))},
            "state": {"events": [e.wire(viewer=viewer) for e in state]},
            "timeline": {"events": [e.wire(viewer=viewer) for e in timeline],
                         "limited": limited, "prev_batch": f"s{start - 1}"},
            "ephemeral": {"events": []},
            "account_data": {"events": []},
            "unread_notifications": {"highlight_count": 0, "notification_count": 0},
        }  # fmt: skip

    def _device_lists(self, uid: str, since: int | None) -> dict[str, list[str]]:
        if since is None:
            return {"changed": [], "left": []}
        sharing = self._sharing(uid)
        changed = {who for pos, who in self._device_changes if pos > since and who in sharing}
        gone: set[str] = set()
        for room in self._rooms.values():
            if not room.encrypted:
                continue
            mine = room.membership(uid)
            for event in room.events:
                if event.pos <= since:
                    continue
                if event.type == "m.room.encryption" and mine == "join":
                    changed.update(room.members("join"))
                if event.type != "m.room.member" or event.state_key is None:
                    continue
                membership = event.content.get("membership")
                if membership == "join" and mine == "join":
                    changed.update(room.members("join") if event.state_key == uid
                                   else [event.state_key])  # fmt: skip
                elif membership in ("leave", "ban"):
                    gone.update(room.members("join") if event.state_key == uid
                                else [event.state_key])  # fmt: skip
        gone -= self._sharing(uid, encrypted=True)
        changed -= gone
        return {"changed": sorted(changed), "left": sorted(gone)}

    # keys

    def _api_keys_upload(self, call: _Call) -> Reply:
        body = call.body
        with self._cond:
            device = self._devices[(call.user, call.device)]
            keys = body.get("device_keys")
            if keys is not None:
                if not isinstance(keys, dict) or (keys.get("user_id"), keys.get("device_id")) != (
                    call.user, call.device
                ):  # fmt: skip
                    why = "device_keys must name the token's user_id and device_id"
                    return error(400, "M_INVALID_PARAM", why)
            one_time = body.get("one_time_keys") or {}
            fallback = body.get("fallback_keys") or {}
            if not isinstance(one_time, dict) or not isinstance(fallback, dict):
                return error(400, "M_BAD_JSON", "one_time_keys and fallback_keys are objects")
            for key_id, key in one_time.items():
                old = device.one_time_keys.get(key_id)
                if old is not None and old != key:
                    return error(400, "M_INVALID_PARAM", f"One time key {key_id} already exists")
            if keys is not None and keys != device.keys:
                device.keys = copy_json(keys)
                self._device_changed(call.user)
            for key_id, key in one_time.items():
                device.one_time_keys[key_id] = copy_json(key)
            for key_id, key in fallback.items():
                algorithm = key_id.split(":", 1)[0]
                old = device.fallback_keys.get(algorithm)
                if old is None or (old["key_id"], old["key"]) != (key_id, key):
                    device.fallback_keys[algorithm] = {"key_id": key_id, "key": copy_json(key),
                                                       "used": False}  # fmt: skip
            self._cond.notify_all()
            return _ok({"one_time_key_counts": device.counts()})

    def _api_keys_query(self, call: _Call) -> Reply:
        wanted = call.body.get("device_keys")
        if not isinstance(wanted, dict):
            return error(400, "M_BAD_JSON", "device_keys is required")
        answer: dict[str, dict[str, Any]] = {}
        with self._cond:
            for uid, devices in wanted.items():
                if uid not in self._users:
                    continue
                found = answer.setdefault(uid, {})
                for (owner, device_id), device in self._devices.items():
                    if owner != uid or device.keys is None:
                        continue
                    if devices and device_id not in devices:
                        continue
                    keys = copy_json(device.keys)
                    if device.display_name:
                        keys.setdefault("unsigned", {})["device_display_name"] = device.display_name
                    found[device_id] = keys
        return _ok({"device_keys": answer, "failures": {}})

    def _api_keys_claim(self, call: _Call) -> Reply:
        wanted = call.body.get("one_time_keys")
        if not isinstance(wanted, dict):
            return error(400, "M_BAD_JSON", "one_time_keys is required")
        answer: dict[str, dict[str, Any]] = {}
        with self._cond:
            for uid, devices in wanted.items():
                for device_id, algorithm in (devices or {}).items():
                    device = self._devices.get((uid, device_id))
                    if device is None:
                        continue
                    key_id = next((k for k in device.one_time_keys
                                   if k.split(":", 1)[0] == algorithm), None)  # fmt: skip
                    if key_id is not None:
                        key, fallback = device.one_time_keys.pop(key_id), False
                    elif algorithm in device.fallback_keys:
                        spare = device.fallback_keys[algorithm]
                        spare["used"] = True
                        key_id, key, fallback = spare["key_id"], spare["key"], True
                    else:
                        continue
                    answer.setdefault(uid, {})[device_id] = {key_id: copy_json(key)}
                    self._claims.append({
                        "by": call.user, "user": uid, "device_id": device_id,
                        "algorithm": algorithm, "key_id": key_id, "fallback": fallback,
                        "at": time.monotonic(),
                    })  # fmt: skip
            self._cond.notify_all()
        return _ok({"one_time_keys": answer, "failures": {}})

    def _api_sendToDevice(self, call: _Call) -> Reply:  # noqa: N802 - the endpoint's name
        event_type, txn_id = call.args
        messages = call.body.get("messages")
        if not isinstance(messages, dict) or not all(isinstance(m, dict)
                                                      for m in messages.values()):  # fmt: skip
            return error(400, "M_BAD_JSON", "messages must map users to devices to contents")
        key = (call.user, call.device, call.path)
        with self._cond:
            if key in self._txns:
                return _ok()
            refusal = self._fault(call, txn_id)
            if refusal is not None:
                return refusal
            for uid, devices in messages.items():
                for device_id, content in devices.items():
                    event = {"sender": call.user, "type": event_type, "content": content}
                    delivered = self._deliver(uid, device_id, event)
                    self._to_device_sent.append({
                        "type": event_type, "txn_id": txn_id, "sender": call.user,
                        "sender_device": call.device, "user": uid, "device_id": device_id,
                        "content": copy_json(content), "delivered": delivered,
                        "at": time.monotonic(),
                    })  # fmt: skip
            self._txns[key] = {}
            self._cond.notify_all()
            return _ok()


def _is_media(segments: list[str]) -> bool:
    """A path of the media repository: `/_matrix/media/...` or `/_matrix/client/v1/media/`."""
    return segments[1:3] == ["_matrix", "media"] or (
        segments[1:3] == ["_matrix", "client"] and segments[4:5] == ["media"]
    )


def _media_id(mxc: str) -> str:
    prefix = f"mxc://{SERVER_NAME}/"
    if not mxc.startswith(prefix):
        raise LookupError(f"{mxc} is not this server's media")
    return mxc[len(prefix) :]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.matrix",
        description="A fake Matrix homeserver: prints its base URL, serves until killed.",
    )
    parser.parse_args()
    serve_until_killed(FakeMatrix())


if __name__ == "__main__":
    main()
