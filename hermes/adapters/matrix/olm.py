"""hermes's Matrix device and what it knows in encrypted rooms, through vodozemac: its Olm
account (identity and one-time keys), its Olm sessions with other devices (which carry
room keys), the Megolm sessions that decrypt each room's messages and the one per room
it encrypts its own with. No I/O but state.db.

Every piece is pickled, sealed with a key derived (scrypt, a salt of its own) from the
operator's passphrase, into the adapter's cursors. Changes collect in `pending` and
`flush()` writes them in one commit: a to-device message that advanced an Olm session
and brought a room key is kept whole or not at all, and before the sync that brought it
is committed (a to-device message is delivered once). A restart keeps the device (no
new keys for others to trust) and every session.

Trust: an Olm payload must be for this device and name the user the server says sent
it; a new Olm session a pre-key message opens is kept only once its payload passes that
check, and the sessions with keys of no device hermes has looked up are bounded
(MAX_STRANGER_SESSIONS). A room key is taken only from the device it names (its keys as
keys/query gives them, trusted by the caller), and belongs to that device's user: it
opens only their events in that room, and a later copy from anyone else never replaces
it. A forwarded room key is taken only from the device that made the session. The first
keys seen for a device id are the ones trusted for it (tofu): other keys later under the
same id are never given a room key nor believed.

Everything here may be handed anyone's bytes: malformed input is a CryptoError.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from typing import Any, Protocol

import attrs
import vodozemac

from hermes.actors.clock import Clock
from hermes.actors.errors import HermesError
from hermes.adapters.matrix.api import as_dict

log = logging.getLogger(__name__)

OLM = "m.olm.v1.curve25519-aes-sha2"
MEGOLM = "m.megolm.v1.aes-sha2"
OTK = "signed_curve25519"
MAX_OLM_SESSIONS = 5  # per identity key (another device's curve25519): the newest are tried
# first, the oldest dropped. A device opens another only when its last went wrong, so five
# cover a real one; one key's flood of pre-key messages keeps five.
MAX_STRANGER_SESSIONS = 25  # in all, with identity keys of no device whose keys hermes has
# fetched (a stranger's, or a device not looked up yet: it sent no room key, hermes shared
# none with it). A pre-key message costs its sender nothing (the fallback key takes any
# number), so fresh keys would each add a session for ever: these live in one row, the
# oldest key's sessions dropped first, at most 25 pickles of about 1.5 KB. A device whose
# keys are fetched and trusted moves its sessions to a row of its own and out of the count.
ROTATION_MS = 604_800_000  # a room's outbound session at most a week (the spec's default)
ROTATION_MSGS = 100  # and at most this many messages
SEEN_INDEXES = 10_000  # (session, index) -> event id remembered, against replays


class CryptoError(HermesError):
    """An encrypted payload hermes refuses: not for this device, a forged sender, no
    session that opens it, malformed."""


class MissingKey(HermesError):
    """A room event whose Megolm session hermes has not been given (yet)."""

    def __init__(self, room_id: str, session_id: str, sender_key: str) -> None:
        super().__init__(f"no room key for session {session_id} in {room_id}")
        self.room_id, self.session_id, self.sender_key = room_id, session_id, sender_key


class Store(Protocol):
    """Where the pickles go: the adapter's cursors."""

    async def get(self, key: str) -> str | None: ...
    async def put_many(self, values: dict[str, str]) -> None: ...


def canonical(value: Any) -> bytes:
    """Matrix's canonical JSON, what signatures cover."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signed_by(value: dict[str, Any], user_id: str, key_id: str, ed25519: str) -> bool:
    """Whether `value` carries `user_id`'s valid signature by `ed25519` under `key_id`."""
    signature = as_dict(as_dict(value.get("signatures")).get(user_id)).get(key_id)
    if not isinstance(signature, str):
        return False
    unsigned = {k: v for k, v in value.items() if k not in ("signatures", "unsigned")}
    try:
        key = vodozemac.Ed25519PublicKey.from_base64(ed25519)
        key.verify_signature(canonical(unsigned), vodozemac.Ed25519Signature.from_base64(signature))
    except ValueError:  # vodozemac's exceptions are ValueErrors
        return False
    return True


@attrs.frozen
class Device:
    """Another device, as its own signed keys name it."""

    user_id: str
    device_id: str
    curve25519: str
    ed25519: str


def device_of(user_id: str, device_id: str, keys: Any) -> Device | None:
    """The device a keys/query answer describes, if it is well formed (its keys real
    keys) and self-signed."""
    keys = as_dict(keys)
    algorithms = keys.get("algorithms")
    if keys.get("user_id") != user_id or keys.get("device_id") != device_id:
        return None
    if not isinstance(algorithms, list) or OLM not in algorithms:
        return None
    named = as_dict(keys.get("keys"))
    curve, ed = named.get(f"curve25519:{device_id}"), named.get(f"ed25519:{device_id}")
    if not isinstance(curve, str) or not isinstance(ed, str):
        return None
    try:
        vodozemac.Curve25519PublicKey.from_base64(curve)
    except ValueError:
        return None
    if not signed_by(keys, user_id, f"ed25519:{device_id}", ed):
        return None
    return Device(user_id, device_id, curve, ed)


@attrs.frozen
class InboundRoomKey:
    """A room's Megolm session as another device shared it."""

    session: vodozemac.InboundGroupSession
    sender: str  # the user whose device made it: it opens only their events
    sender_key: str  # that device's curve25519


@attrs.define
class OutboundRoomKey:
    """The Megolm session hermes encrypts one room's messages with, and the devices that
    have been given it."""

    session: vodozemac.GroupSession
    created: float  # wall time: the rotation period spans restarts
    shared: set[tuple[str, str]] = attrs.Factory(set)


class Olm:
    """One device's crypto state, kept under `prefix` in the store (the prefix names the
    device: another device starts with nothing of this one's)."""

    def __init__(
        self,
        store: Store,
        prefix: str,
        secret: str,
        user_id: str,
        device_id: str,
        clock: Clock | None = None,
    ) -> None:
        """`clock`: what a room key's age is read from (serve's one clock; real time
        unless given)."""
        self.clock = clock or Clock()
        self.store = store
        self.prefix = prefix
        self.secret = secret
        self.key = b""  # derived in load()
        self.user_id = user_id
        self.device_id = device_id
        self.account: vodozemac.Account | None = None  # loaded or made in load()
        self.sessions: dict[str, list[vodozemac.Session]] = {}  # by the other's curve25519
        self.strangers: list[str] | None = None  # curves no fetched device has, oldest first
        self.inbound: dict[tuple[str, str], InboundRoomKey] = {}  # by (room, session id)
        self.outbound: dict[str, OutboundRoomKey] = {}  # by room
        self.trusted: dict[tuple[str, str], str] = {}  # (user, device) -> first ed25519
        self.seen: dict[tuple[str, int], str] = {}  # (session, message index) -> event id
        self.pending: dict[str, str] = {}  # writes not yet flushed

    async def flush(self) -> None:
        """Write every change since the last flush, in one commit."""
        if self.pending:
            values, self.pending = self.pending, {}
            await self.store.put_many(values)

    # -- the account -----------------------------------------------------------------------

    async def load(self) -> bool:
        """The kept account of this device, or a new one (kept at once): True when new."""
        salt = await self.store.get(self.prefix + "salt")
        if salt is None:
            salt = secrets.token_hex(16)
            self.pending[self.prefix + "salt"] = salt
        self.key = hashlib.scrypt(
            self.secret.encode(), salt=bytes.fromhex(salt), n=2**14, r=8, p=1, dklen=32
        )
        kept = await self.store.get(self.prefix + "account")
        if kept is not None:
            try:
                self.account = vodozemac.Account.from_pickle(kept, self.key)
            except ValueError as exc:
                raise CryptoError(
                    "the encryption state in state.db does not open with this pickle key"
                    " (was the key's variable changed?)"
                ) from exc
            return False
        self.account = vodozemac.Account()
        self.keep_account()
        await self.flush()
        return True

    @property
    def me(self) -> vodozemac.Account:
        if self.account is None:
            raise CryptoError("the encryption state is not loaded")
        return self.account

    def keep_account(self) -> None:
        self.pending[self.prefix + "account"] = self.me.pickle(self.key)

    @property
    def curve25519(self) -> str:
        return self.me.curve25519_key.to_base64()

    @property
    def ed25519(self) -> str:
        return self.me.ed25519_key.to_base64()

    def sign(self, value: dict[str, Any]) -> dict[str, Any]:
        """`value` with this device's signature added."""
        unsigned = {k: v for k, v in value.items() if k not in ("signatures", "unsigned")}
        signature = self.me.sign(canonical(unsigned)).to_base64()
        mine = {self.user_id: {f"ed25519:{self.device_id}": signature}}
        return {**value, "signatures": mine}

    def device_keys(self) -> dict[str, Any]:
        return self.sign(
            {
                "user_id": self.user_id,
                "device_id": self.device_id,
                "algorithms": [OLM, MEGOLM],
                "keys": {
                    f"curve25519:{self.device_id}": self.curve25519,
                    f"ed25519:{self.device_id}": self.ed25519,
                },
            }
        )

    async def new_one_time_keys(self, held: int, fallback: bool) -> dict[str, Any]:
        """The keys/upload body that brings the server to half the account's one-time
        keys (`held`: what it has) and, `fallback`, a new fallback key; keys made before
        and never published go again, and count. The account is kept before they are
        sent, so a key the server hands out is one hermes still holds."""
        unpublished = self.me.one_time_keys
        wanted = self.me.max_number_of_one_time_keys // 2 - held - len(unpublished)
        if wanted > 0:
            self.me.generate_one_time_keys(wanted)
        if fallback and not self.me.fallback_key:  # one made and not yet sent goes as it is
            self.me.generate_fallback_key()
        self.keep_account()
        await self.flush()
        body: dict[str, Any] = {}
        otks = {
            f"{OTK}:{i}": self.sign({"key": k.to_base64()})
            for i, k in self.me.one_time_keys.items()
        }
        if otks:
            body["one_time_keys"] = otks
        fallbacks = {
            f"{OTK}:{i}": self.sign({"key": k.to_base64(), "fallback": True})
            for i, k in self.me.fallback_key.items()
        }
        if fallbacks:
            body["fallback_keys"] = fallbacks
        return body

    async def published(self) -> None:
        self.me.mark_keys_as_published()
        self.keep_account()
        await self.flush()

    # -- devices ---------------------------------------------------------------------------

    async def trust(self, device: Device) -> bool:
        """Whether `device` is the one first seen under its id (kept: tofu)."""
        where = (device.user_id, device.device_id)
        if where not in self.trusted:
            key = f"{self.prefix}device:{device.user_id}|{device.device_id}"
            kept = await self.store.get(key)
            if kept is None:
                self.pending[key] = kept = device.ed25519
            self.trusted.setdefault(where, kept)
        if self.trusted[where] != device.ed25519:
            log.warning(
                "%s's device %s shows other keys than when first seen: it is not trusted",
                device.user_id,
                device.device_id,
            )
            return False
        return True

    # -- Olm: to-device --------------------------------------------------------------------

    async def _stranger_curves(self) -> list[str]:
        """The identity keys whose sessions live in the strangers' row (loaded once)."""
        if self.strangers is None:
            kept = json.loads(await self.store.get(f"{self.prefix}olm-strangers") or "[]")
            for curve, pickles in kept:
                self.sessions[curve] = [vodozemac.Session.from_pickle(p, self.key) for p in pickles]
            self.strangers = [curve for curve, _ in kept]
        return self.strangers

    async def _olm_sessions(self, curve: str) -> list[vodozemac.Session]:
        """The sessions with `curve`, newest first (a key with none is not remembered:
        anyone can name any number of keys)."""
        await self._stranger_curves()
        if curve not in self.sessions:
            kept = json.loads(await self.store.get(f"{self.prefix}olm:{curve}") or "[]")
            loaded = [vodozemac.Session.from_pickle(p, self.key) for p in kept]
            return self.sessions.setdefault(curve, loaded) if loaded else []
        return self.sessions[curve]

    async def _keep_olm(self, curve: str, session: vodozemac.Session) -> None:
        """`session` as the newest with `curve`, all of them kept."""
        kept = await self._olm_sessions(curve)
        others = [s for s in kept if s.session_id != session.session_id]
        self.sessions[curve] = [session, *others][:MAX_OLM_SESSIONS]
        if curve in await self._stranger_curves():
            self._keep_strangers()
        else:
            self._keep_own(curve)

    def _keep_own(self, curve: str) -> None:
        pickles = [s.pickle(self.key) for s in self.sessions[curve]]
        self.pending[f"{self.prefix}olm:{curve}"] = json.dumps(pickles)

    def _keep_strangers(self) -> None:
        rows = [[c, [s.pickle(self.key) for s in self.sessions[c]]] for c in self.strangers or []]
        self.pending[f"{self.prefix}olm-strangers"] = json.dumps(rows)

    async def _keep_opened(self, curve: str, session: vodozemac.Session) -> None:
        """A session another device opened, its payload checked. With a key that has
        none kept, or a stranger's, it is a stranger's (the newest), and the oldest
        strangers' sessions go past MAX_STRANGER_SESSIONS."""
        kept = await self._olm_sessions(curve)
        strangers = await self._stranger_curves()
        if kept and curve not in strangers:  # a known device's
            await self._keep_olm(curve, session)
            return
        if curve in strangers:
            strangers.remove(curve)
        strangers.append(curve)
        others = [s for s in kept if s.session_id != session.session_id]
        self.sessions[curve] = [session, *others][:MAX_OLM_SESSIONS]
        while sum(len(self.sessions[c]) for c in strangers) > MAX_STRANGER_SESSIONS:
            gone = strangers.pop(0)
            del self.sessions[gone]
            log.info("the Olm sessions with %s, a key of no known device, are dropped", gone)
        self._keep_strangers()

    async def known(self, device: Device) -> None:
        """`device`'s keys were fetched and are trusted: its sessions, if they were a
        stranger's, move to a row of their own, out of the strangers' count."""
        strangers = await self._stranger_curves()
        if device.curve25519 in strangers:
            strangers.remove(device.curve25519)
            self._keep_strangers()
            self._keep_own(device.curve25519)

    async def has_olm(self, device: Device) -> bool:
        return bool(await self._olm_sessions(device.curve25519))

    async def start_olm(self, device: Device, one_time_key: str) -> None:
        """A new Olm session with `device`, from a one-time key it signed."""
        try:
            one_time = vodozemac.Curve25519PublicKey.from_base64(one_time_key)
            identity = vodozemac.Curve25519PublicKey.from_base64(device.curve25519)
        except ValueError as exc:
            raise CryptoError(f"{device.user_id}'s device {device.device_id}: {exc}") from exc
        await self.known(device)
        await self._keep_olm(device.curve25519, self.me.create_outbound_session(identity, one_time))

    async def encrypt_for(self, device: Device, type_: str, content: dict[str, Any]) -> dict:
        """A to-device `m.room.encrypted` content carrying `type_`/`content` to `device`."""
        await self.known(device)
        [session, *_] = await self._olm_sessions(device.curve25519)
        payload = {
            "type": type_,
            "content": content,
            "sender": self.user_id,
            "sender_device": self.device_id,
            "keys": {"ed25519": self.ed25519},
            "recipient": device.user_id,
            "recipient_keys": {"ed25519": device.ed25519},
        }
        kind, body = session.encrypt(canonical(payload)).to_parts()
        await self._keep_olm(device.curve25519, session)
        ciphertext = {device.curve25519: {"type": kind, "body": _b64(body)}}
        return {"algorithm": OLM, "sender_key": self.curve25519, "ciphertext": ciphertext}

    async def decrypt_to_device(self, event: dict[str, Any]) -> dict[str, Any]:
        """The payload of a to-device `m.room.encrypted` event, checked: for this device,
        from the user the server says sent it, its claimed key, type and content there;
        `sender_key` added (the sending device's curve25519). Its session's advance is
        pending until the caller flushes; a session its pre-key message opened is kept
        only once the payload passed (anyone can open one: it is their bytes until then)."""
        content = as_dict(event.get("content"))
        sender, curve = event.get("sender"), content.get("sender_key")
        if content.get("algorithm") != OLM or not isinstance(curve, str):
            raise CryptoError("a to-device message not encrypted with Olm")
        mine = as_dict(as_dict(content.get("ciphertext")).get(self.curve25519))
        kind, body = mine.get("type"), mine.get("body")
        if kind not in (0, 1) or isinstance(kind, bool) or not isinstance(body, str):
            raise CryptoError("a to-device message not encrypted for this device")
        try:
            message = vodozemac.AnyOlmMessage.from_parts(kind, _unb64(body))
            plaintext, opened = await self._olm_decrypt(curve, kind, message)
            payload = json.loads(plaintext)
        except ValueError as exc:  # vodozemac's, base64's and json's
            raise CryptoError(f"an Olm message from {sender} that does not open: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("sender") != sender:
            raise CryptoError(f"an Olm message whose payload is not from {sender}")
        if payload.get("recipient") != self.user_id:
            raise CryptoError("an Olm message for another recipient")
        if as_dict(payload.get("recipient_keys")).get("ed25519") != self.ed25519:
            raise CryptoError("an Olm message for another device")
        if not isinstance(as_dict(payload.get("keys")).get("ed25519"), str):
            raise CryptoError("an Olm message that does not claim its sender's key")
        if not isinstance(payload.get("type"), str) or not isinstance(payload.get("content"), dict):
            raise CryptoError("an Olm message without a type and content")
        if opened is not None:
            await self._keep_opened(curve, opened)
        return {**payload, "sender_key": curve}

    async def _olm_decrypt(
        self, curve: str, kind: int, message: Any
    ) -> tuple[bytes, vodozemac.Session | None]:
        """The plaintext, and the session a pre-key message opened (None: a kept one
        opened it, its advance kept). The account is kept at once: its one-time key is
        spent either way."""
        for session in await self._olm_sessions(curve):
            if kind == 0 and not session.session_matches(message.to_pre_key()):
                continue
            try:
                plaintext = session.decrypt(message)
            except ValueError:
                continue
            await self._keep_olm(curve, session)
            return plaintext, None
        if kind != 0:
            raise ValueError("no Olm session with the sender opens it")
        sender_key = vodozemac.Curve25519PublicKey.from_base64(curve)
        session, plaintext = self.me.create_inbound_session(sender_key, message.to_pre_key())
        self.keep_account()  # its one-time key is spent
        return plaintext, session

    # -- Megolm: rooms ---------------------------------------------------------------------

    async def take_room_key(self, payload: dict[str, Any], device: Device) -> str | None:
        """Keep the room key an Olm payload from `device` carries (m.room_key, or an
        m.forwarded_room_key of a session that device made): its room, or None. The
        caller has checked that `device` sent the payload and is trusted."""
        content = as_dict(payload.get("content"))
        room, session_id = content.get("room_id"), content.get("session_id")
        key = content.get("session_key")
        kind = payload.get("type")
        if kind not in ("m.room_key", "m.forwarded_room_key") or content.get("algorithm") != MEGOLM:
            return None
        if not all(isinstance(v, str) for v in (room, session_id, key)):
            return None
        if kind == "m.forwarded_room_key" and (
            content.get("sender_key") != device.curve25519
            or content.get("sender_claimed_ed25519_key") != device.ed25519
        ):
            log.warning(
                "a room key %s forwarded by %s, who did not make it: not taken",
                session_id,
                device.user_id,
            )
            return None
        try:
            if kind == "m.room_key":
                session = vodozemac.InboundGroupSession(vodozemac.SessionKey(key))
            else:
                exported = vodozemac.ExportedSessionKey(key)
                session = vodozemac.InboundGroupSession.import_session(exported)
        except ValueError:
            log.warning("a room key from %s that does not decode", device.user_id)
            return None
        if session.session_id != session_id:
            return None
        return room if await self._keep_inbound(room, session, device) else None

    async def _keep_inbound(
        self, room: str, session: vodozemac.InboundGroupSession, device: Device
    ) -> bool:
        found = await self._inbound(room, session.session_id)
        if found is not None:
            if (found.sender, found.sender_key) != (device.user_id, device.curve25519):
                log.warning(
                    "%s sent a copy of %s's room key %s: not taken",
                    device.user_id,
                    found.sender,
                    session.session_id,
                )
                return False
            if found.session.first_known_index <= session.first_known_index:
                return True  # had it already, from as early or earlier
        taken = InboundRoomKey(session, device.user_id, device.curve25519)
        self.inbound[(room, session.session_id)] = taken
        value = {
            "sender": taken.sender,
            "sender_key": taken.sender_key,
            "pickle": session.pickle(self.key),
        }
        self.pending[f"{self.prefix}in:{room}|{session.session_id}"] = json.dumps(value)
        return True

    async def _inbound(self, room: str, session_id: str) -> InboundRoomKey | None:
        if (room, session_id) not in self.inbound:
            kept = await self.store.get(f"{self.prefix}in:{room}|{session_id}")
            if kept is None:
                return None
            data = json.loads(kept)
            session = vodozemac.InboundGroupSession.from_pickle(data["pickle"], self.key)
            loaded = InboundRoomKey(session, data["sender"], data["sender_key"])
            return self.inbound.setdefault((room, session_id), loaded)
        return self.inbound[(room, session_id)]

    async def has_room_key(self, room: str, session_id: str) -> bool:
        return await self._inbound(room, session_id) is not None

    async def decrypt_room_event(self, room_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """A room's `m.room.encrypted` event as the event it carries (type and content
        replaced). MissingKey when its session has not come; CryptoError for one that
        must not be read (another user's session, another room's payload, a replay)."""
        content = as_dict(event.get("content"))
        session_id, ciphertext = content.get("session_id"), content.get("ciphertext")
        if content.get("algorithm") != MEGOLM or not isinstance(session_id, str):
            raise CryptoError("an event not encrypted with Megolm")
        if not isinstance(ciphertext, str):
            raise CryptoError("an encrypted event without its ciphertext")
        found = await self._inbound(room_id, session_id)
        if found is None:
            raise MissingKey(room_id, session_id, str(content.get("sender_key") or ""))
        if found.sender != event.get("sender"):
            raise CryptoError(f"{event.get('sender')} sent with {found.sender}'s session")
        try:
            message = vodozemac.MegolmMessage.from_base64(ciphertext)
        except ValueError as exc:
            raise CryptoError(f"an encrypted event that does not decode: {exc}") from exc
        try:
            plain = found.session.decrypt(message)
        except vodozemac.MegolmDecryptionException as exc:
            raise MissingKey(room_id, session_id, found.sender_key) from exc  # an earlier index
        try:
            payload = json.loads(plain.plaintext)
        except ValueError as exc:
            raise CryptoError(f"an encrypted event that does not open: {exc}") from exc
        self._not_replayed(session_id, plain.message_index, event.get("event_id"))
        if not isinstance(payload, dict) or payload.get("room_id") != room_id:
            raise CryptoError("an encrypted event whose payload belongs to another room")
        inner = payload.get("content")
        if not isinstance(inner, dict) or not isinstance(payload.get("type"), str):
            raise CryptoError("an encrypted event without a type and content")
        relation = content.get("m.relates_to")  # in the clear: what the spec goes by
        if isinstance(relation, dict):
            inner = {**inner, "m.relates_to": relation}
        return {**event, "type": payload["type"], "content": inner}

    def _not_replayed(self, session_id: str, index: int, event_id: Any) -> None:
        """One message index of a session is one event: another event with it is a
        replay of an old ciphertext."""
        seen = self.seen.setdefault((session_id, index), str(event_id))
        if seen != str(event_id):
            raise CryptoError(f"{event_id} replays message {index} of session {session_id}")
        while len(self.seen) > SEEN_INDEXES:
            del self.seen[next(iter(self.seen))]

    async def room_key(self, room_id: str, period_ms: int, period_msgs: int) -> OutboundRoomKey:
        """The session hermes encrypts `room_id`'s messages with: the kept one, or a new
        one when none is, or it is older than the room's rotation period or has sent its
        number of messages."""
        found = await self._outbound(room_id)
        age_ms = (self.clock.now() - found.created) * 1000 if found is not None else 0
        if found is None or age_ms >= period_ms or found.session.message_index >= period_msgs:
            found = OutboundRoomKey(vodozemac.GroupSession(), self.clock.now())
            own = vodozemac.InboundGroupSession(found.session.session_key)  # reads its own
            mine = Device(self.user_id, self.device_id, self.curve25519, self.ed25519)
            await self._keep_inbound(room_id, own, mine)
            self.outbound[room_id] = found
            self.keep_room_key(room_id, found)
        return found

    async def _outbound(self, room_id: str) -> OutboundRoomKey | None:
        if room_id not in self.outbound:
            data = json.loads(await self.store.get(f"{self.prefix}out:{room_id}") or "null")
            if data is None:
                return None
            session = vodozemac.GroupSession.from_pickle(data["pickle"], self.key)
            shared = {(u, d) for u, d in data["shared"]}
            loaded = OutboundRoomKey(session, data["created"], shared)
            return self.outbound.setdefault(room_id, loaded)
        return self.outbound[room_id]

    async def rotate(self, room_id: str) -> None:
        """The next message in `room_id` goes under a new session (its membership
        changed: one who left must not read on, one who joined must not read back)."""
        found = await self._outbound(room_id)
        if found is not None and found.created > 0:
            found.created = 0.0
            self.keep_room_key(room_id, found)

    def keep_room_key(self, room_id: str, found: OutboundRoomKey) -> None:
        value = {
            "pickle": found.session.pickle(self.key),
            "created": found.created,
            "shared": sorted(found.shared),
        }
        self.pending[f"{self.prefix}out:{room_id}"] = json.dumps(value)

    def share_content(self, room_id: str, found: OutboundRoomKey) -> dict[str, Any]:
        """The m.room_key content that gives a device the session from its next message."""
        return {
            "algorithm": MEGOLM,
            "room_id": room_id,
            "session_id": found.session.session_id,
            "session_key": found.session.session_key.to_base64(),
        }

    async def encrypt_event(
        self, room_id: str, found: OutboundRoomKey, type_: str, content: dict[str, Any]
    ) -> dict[str, Any]:
        """The `m.room.encrypted` content of an event (its relation in the clear too, as
        the spec says, so servers can aggregate threads); the session's advance is kept
        before the event leaves."""
        payload = {"type": type_, "content": content, "room_id": room_id}
        ciphertext = found.session.encrypt(canonical(payload)).to_base64()
        self.keep_room_key(room_id, found)
        await self.flush()
        encrypted = {
            "algorithm": MEGOLM,
            "sender_key": self.curve25519,
            "ciphertext": ciphertext,
            "session_id": found.session.session_id,
            "device_id": self.device_id,
        }
        if isinstance(content.get("m.relates_to"), dict):
            encrypted["m.relates_to"] = content["m.relates_to"]
        return encrypted


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
