"""hermes's Matrix device and what it knows in encrypted rooms, through vodozemac: its Olm
account (identity and one-time keys), its Olm sessions with other devices (which carry
room keys), the Megolm sessions that decrypt each room's messages and the one per room
it encrypts its own with. No I/O but state.db.

Every piece is pickled, sealed with the operator's pickle key, into the adapter's
cursors (state.db, through the writer) as soon as it changes and before the sync that
brought the change is committed: a to-device message is delivered once, so a room key
not kept when its batch commits would be lost for good. A restart keeps the device (no
new keys for others to trust) and every session.

Trust: an Olm message's claimed sender must be the to-device sender; a Megolm session
belongs to the user and device whose Olm session brought it, and decrypts only that
user's events in that room. A device's keys must carry its own signature, and the first
keys seen for a device id are the ones trusted for it (tofu): other keys later under the
same id are never given a room key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from typing import Any, Protocol

import attrs
import vodozemac

from hermes.actors.errors import HermesError

log = logging.getLogger(__name__)

OLM = "m.olm.v1.curve25519-aes-sha2"
MEGOLM = "m.megolm.v1.aes-sha2"
OTK = "signed_curve25519"
MAX_OLM_SESSIONS = 5  # per other device: the newest are tried first
ROTATION_MS = 604_800_000  # a room's outbound session at most a week (the spec's default)
ROTATION_MSGS = 100  # and at most this many messages


class CryptoError(HermesError):
    """An encrypted payload hermes refuses: not for this device, a forged sender, no
    session that opens it."""


class MissingKey(HermesError):
    """A room event whose Megolm session hermes has not been given (yet)."""

    def __init__(self, room_id: str, session_id: str, sender_key: str) -> None:
        super().__init__(f"no room key for session {session_id} in {room_id}")
        self.room_id, self.session_id, self.sender_key = room_id, session_id, sender_key


class Store(Protocol):
    """Where the pickles go: the adapter's cursors."""

    async def get(self, key: str) -> str | None: ...
    async def put(self, key: str, value: str) -> None: ...


def canonical(value: Any) -> bytes:
    """Matrix's canonical JSON, what signatures cover."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def pickle_key(secret: str) -> bytes:
    """The 32 bytes that seal the pickles, from the operator's passphrase."""
    return hashlib.sha256(secret.encode()).digest()


def signed_by(value: dict[str, Any], user_id: str, key_id: str, ed25519: str) -> bool:
    """Whether `value` carries `user_id`'s valid signature by `ed25519` under `key_id`."""
    signature = value.get("signatures", {}).get(user_id, {}).get(key_id)
    if not isinstance(signature, str):
        return False
    unsigned = {k: v for k, v in value.items() if k not in ("signatures", "unsigned")}
    try:
        key = vodozemac.Ed25519PublicKey.from_base64(ed25519)
        key.verify_signature(canonical(unsigned), vodozemac.Ed25519Signature.from_base64(signature))
    except (vodozemac.KeyException, vodozemac.SignatureException, ValueError):
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
    """The device a keys/query answer describes, if it is well formed and self-signed."""
    if not isinstance(keys, dict) or keys.get("user_id") != user_id:
        return None
    if keys.get("device_id") != device_id or OLM not in keys.get("algorithms", []):
        return None
    named = keys.get("keys") if isinstance(keys.get("keys"), dict) else {}
    curve, ed = named.get(f"curve25519:{device_id}"), named.get(f"ed25519:{device_id}")
    if not isinstance(curve, str) or not isinstance(ed, str):
        return None
    if not signed_by(keys, user_id, f"ed25519:{device_id}", ed):
        return None
    return Device(user_id, device_id, curve, ed)


@attrs.frozen
class InboundRoomKey:
    """A room's Megolm session as another device shared it."""

    session: vodozemac.InboundGroupSession
    sender: str  # the user whose Olm session brought it: it opens only their events
    sender_key: str


@attrs.define
class OutboundRoomKey:
    """The Megolm session hermes encrypts one room's messages with, and the devices that
    have been given it."""

    session: vodozemac.GroupSession
    created: float  # wall time: the rotation period spans restarts
    shared: set[tuple[str, str]] = attrs.Factory(set)


class Olm:
    """One device's crypto state, kept under `prefix` in the store."""

    def __init__(self, store: Store, prefix: str, secret: str, user_id: str, device_id: str):
        self.store = store
        self.prefix = prefix
        self.key = pickle_key(secret)
        self.user_id = user_id
        self.device_id = device_id
        self.account = vodozemac.Account()
        self.sessions: dict[str, list[vodozemac.Session]] = {}  # by the other's curve25519
        self.inbound: dict[tuple[str, str], InboundRoomKey] = {}  # by (room, session id)
        self.outbound: dict[str, OutboundRoomKey] = {}  # by room
        self.trusted: dict[tuple[str, str], str] = {}  # (user, device) -> first ed25519

    # -- the account -----------------------------------------------------------------------

    async def load(self) -> bool:
        """The kept account of this device, or a new one (kept at once): True when new."""
        kept = json.loads(await self.store.get(self.prefix + "account") or "{}")
        if kept.get("device_id") == self.device_id:
            try:
                self.account = vodozemac.Account.from_pickle(kept["pickle"], self.key)
            except vodozemac.PickleException as exc:
                raise CryptoError(
                    "the encryption state in state.db does not open with this pickle key"
                    " (was the key's variable changed?)"
                ) from exc
            return False
        if kept:
            log.warning("the encryption state kept is for device %s; device %s starts anew",
                        kept.get("device_id"), self.device_id)  # fmt: skip
        await self.save_account()
        return True

    async def save_account(self) -> None:
        pickled = self.account.pickle(self.key)
        value = json.dumps({"device_id": self.device_id, "pickle": pickled})
        await self.store.put(self.prefix + "account", value)

    @property
    def curve25519(self) -> str:
        return self.account.curve25519_key.to_base64()

    @property
    def ed25519(self) -> str:
        return self.account.ed25519_key.to_base64()

    def sign(self, value: dict[str, Any]) -> dict[str, Any]:
        """`value` with this device's signature added."""
        unsigned = {k: v for k, v in value.items() if k not in ("signatures", "unsigned")}
        signature = self.account.sign(canonical(unsigned)).to_base64()
        mine = {self.user_id: {f"ed25519:{self.device_id}": signature}}
        return {**value, "signatures": mine}

    def device_keys(self) -> dict[str, Any]:
        return self.sign({
            "user_id": self.user_id, "device_id": self.device_id,
            "algorithms": [OLM, MEGOLM],
            "keys": {f"curve25519:{self.device_id}": self.curve25519,
                     f"ed25519:{self.device_id}": self.ed25519},
        })  # fmt: skip

    async def new_one_time_keys(self, wanted: int, fallback: bool) -> dict[str, Any]:
        """The keys/upload body for `wanted` more one-time keys (and a fallback key): the
        account is kept before they are sent, so a key the server hands out is one hermes
        still holds. Keys made before and never published are sent again."""
        if wanted > 0:
            self.account.generate_one_time_keys(wanted)
        if fallback:
            self.account.generate_fallback_key()
        await self.save_account()
        body: dict[str, Any] = {}
        otks = {f"{OTK}:{i}": self.sign({"key": k.to_base64()})
                for i, k in self.account.one_time_keys.items()}  # fmt: skip
        if otks:
            body["one_time_keys"] = otks
        fallbacks = {f"{OTK}:{i}": self.sign({"key": k.to_base64(), "fallback": True})
                     for i, k in self.account.fallback_key.items()}  # fmt: skip
        if fallbacks:
            body["fallback_keys"] = fallbacks
        return body

    async def published(self) -> None:
        self.account.mark_keys_as_published()
        await self.save_account()

    # -- devices ---------------------------------------------------------------------------

    async def trust(self, device: Device) -> bool:
        """Whether `device` is the one first seen under its id (kept: tofu)."""
        where = (device.user_id, device.device_id)
        if where not in self.trusted:
            key = f"{self.prefix}device:{device.user_id}|{device.device_id}"
            kept = await self.store.get(key)
            if kept is None:
                await self.store.put(key, device.ed25519)
                kept = device.ed25519
            self.trusted[where] = kept
        if self.trusted[where] != device.ed25519:
            log.warning("%s's device %s shows other keys than when first seen: it gets no"
                        " room keys", device.user_id, device.device_id)  # fmt: skip
            return False
        return True

    # -- Olm: to-device --------------------------------------------------------------------

    async def _olm_sessions(self, curve: str) -> list[vodozemac.Session]:
        if curve not in self.sessions:
            kept = json.loads(await self.store.get(f"{self.prefix}olm:{curve}") or "[]")
            self.sessions[curve] = [vodozemac.Session.from_pickle(p, self.key) for p in kept]
        return self.sessions[curve]

    async def _keep_olm(self, curve: str, session: vodozemac.Session) -> None:
        """`session` as the newest with `curve`, all of them kept."""
        sessions = [
            s for s in await self._olm_sessions(curve) if s.session_id != session.session_id
        ]
        sessions = [session, *sessions][:MAX_OLM_SESSIONS]
        self.sessions[curve] = sessions
        value = json.dumps([s.pickle(self.key) for s in sessions])
        await self.store.put(f"{self.prefix}olm:{curve}", value)

    async def has_olm(self, device: Device) -> bool:
        return bool(await self._olm_sessions(device.curve25519))

    async def start_olm(self, device: Device, one_time_key: str) -> None:
        """A new Olm session with `device`, from a one-time key it signed."""
        session = self.account.create_outbound_session(
            vodozemac.Curve25519PublicKey.from_base64(device.curve25519),
            vodozemac.Curve25519PublicKey.from_base64(one_time_key),
        )
        await self._keep_olm(device.curve25519, session)

    async def encrypt_for(self, device: Device, type_: str, content: dict[str, Any]) -> dict:
        """A to-device `m.room.encrypted` content carrying `type_`/`content` to `device`."""
        [session, *_] = await self._olm_sessions(device.curve25519)
        payload = {
            "type": type_, "content": content, "sender": self.user_id,
            "sender_device": self.device_id, "keys": {"ed25519": self.ed25519},
            "recipient": device.user_id, "recipient_keys": {"ed25519": device.ed25519},
        }  # fmt: skip
        kind, body = session.encrypt(canonical(payload)).to_parts()
        await self._keep_olm(device.curve25519, session)
        ciphertext = {device.curve25519: {"type": kind, "body": _b64(body)}}
        return {"algorithm": OLM, "sender_key": self.curve25519, "ciphertext": ciphertext}

    async def decrypt_to_device(self, event: dict[str, Any]) -> dict[str, Any]:
        """The payload of a to-device `m.room.encrypted` event, checked: for this device,
        from the user the server says sent it."""
        content = event.get("content") if isinstance(event.get("content"), dict) else {}
        sender, curve = event.get("sender"), content.get("sender_key")
        mine = (content.get("ciphertext") or {}).get(self.curve25519)
        if (
            content.get("algorithm") != OLM
            or not isinstance(curve, str)
            or not isinstance(mine, dict)
        ):
            raise CryptoError("a to-device message not encrypted for this device")
        kind, body = mine.get("type"), mine.get("body")
        if kind not in (0, 1) or not isinstance(body, str):
            raise CryptoError("a malformed Olm message")
        try:
            message = vodozemac.AnyOlmMessage.from_parts(kind, _unb64(body))
            plaintext = await self._olm_decrypt(curve, kind, message)
            payload = json.loads(plaintext)
        except (vodozemac.DecodeException, ValueError) as exc:
            raise CryptoError(f"an Olm message from {sender} that does not open: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("sender") != sender:
            raise CryptoError(f"an Olm message whose payload is not from {sender}")
        recipient_keys = payload.get("recipient_keys")
        if payload.get("recipient") != self.user_id or not isinstance(recipient_keys, dict):
            raise CryptoError("an Olm message for another recipient")
        if recipient_keys.get("ed25519") != self.ed25519:
            raise CryptoError("an Olm message for another device")
        return {**payload, "sender_key": curve}

    async def _olm_decrypt(self, curve: str, kind: int, message: Any) -> bytes:
        for session in await self._olm_sessions(curve):
            if kind == 0 and not session.session_matches(message.to_pre_key()):
                continue
            try:
                plaintext = session.decrypt(message)
            except vodozemac.OlmDecryptionException:
                continue
            await self._keep_olm(curve, session)
            return plaintext
        if kind != 0:
            raise ValueError("no Olm session with the sender opens it")
        sender_key = vodozemac.Curve25519PublicKey.from_base64(curve)
        try:
            session, plaintext = self.account.create_inbound_session(
                sender_key, message.to_pre_key()
            )
        except vodozemac.SessionCreationException as exc:
            raise ValueError(str(exc)) from exc
        await self._keep_olm(curve, session)
        await self.save_account()  # its one-time key is spent
        return plaintext

    # -- Megolm: rooms ---------------------------------------------------------------------

    async def take_room_key(self, payload: dict[str, Any]) -> str | None:
        """Keep the room key an Olm payload carries (m.room_key): its room, or None."""
        content = payload.get("content") if isinstance(payload.get("content"), dict) else {}
        room, session_id, key = (
            content.get("room_id"),
            content.get("session_id"),
            content.get("session_key"),
        )
        if payload.get("type") != "m.room_key" or content.get("algorithm") != MEGOLM:
            return None
        if not all(isinstance(v, str) for v in (room, session_id, key)):
            return None
        try:
            session = vodozemac.InboundGroupSession(vodozemac.SessionKey(key))
        except (vodozemac.SessionKeyDecodeException, ValueError):
            log.warning("a room key from %s that does not decode", payload.get("sender"))
            return None
        if session.session_id != session_id:
            return None
        found = await self._inbound(room, session_id)
        if found is not None and found.session.first_known_index <= session.first_known_index:
            return room  # had it already, from as early or earlier
        taken = InboundRoomKey(session, payload["sender"], payload["sender_key"])
        self.inbound[(room, session_id)] = taken
        value = json.dumps({"sender": taken.sender, "sender_key": taken.sender_key,
                            "pickle": session.pickle(self.key)})  # fmt: skip
        await self.store.put(f"{self.prefix}in:{room}|{session_id}", value)
        return room

    async def _inbound(self, room: str, session_id: str) -> InboundRoomKey | None:
        if (room, session_id) not in self.inbound:
            kept = await self.store.get(f"{self.prefix}in:{room}|{session_id}")
            if kept is None:
                return None
            data = json.loads(kept)
            session = vodozemac.InboundGroupSession.from_pickle(data["pickle"], self.key)
            self.inbound[(room, session_id)] = InboundRoomKey(session, data["sender"],
                                                              data["sender_key"])  # fmt: skip
        return self.inbound[(room, session_id)]

    async def decrypt_room_event(self, room_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """A room's `m.room.encrypted` event as the event it carries (type and content
        replaced). MissingKey when its session has not come; CryptoError for one that
        must not be read (another user's session, another room's payload)."""
        content = event.get("content") if isinstance(event.get("content"), dict) else {}
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
            plain = found.session.decrypt(vodozemac.MegolmMessage.from_base64(ciphertext))
            payload = json.loads(plain.plaintext)
        except vodozemac.MegolmDecryptionException as exc:
            raise MissingKey(room_id, session_id, found.sender_key) from exc  # an earlier index
        except (vodozemac.DecodeException, ValueError) as exc:
            raise CryptoError(f"an encrypted event that does not open: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("room_id") != room_id:
            raise CryptoError("an encrypted event whose payload belongs to another room")
        inner = payload.get("content")
        if not isinstance(inner, dict) or not isinstance(payload.get("type"), str):
            raise CryptoError("an encrypted event without a type and content")
        relation = content.get("m.relates_to")  # relations stay outside the encryption
        if isinstance(relation, dict) and "m.relates_to" not in inner:
            inner = {**inner, "m.relates_to": relation}
        return {**event, "type": payload["type"], "content": inner}

    async def room_key(self, room_id: str, period_ms: int, period_msgs: int) -> OutboundRoomKey:
        """The session hermes encrypts `room_id`'s messages with: the kept one, or a new
        one when none is, or it is older than the room's rotation period or has sent its
        number of messages."""
        found = await self._outbound(room_id)
        age_ms = (time.time() - found.created) * 1000 if found is not None else 0
        if found is None or age_ms >= period_ms or found.session.message_index >= period_msgs:
            found = OutboundRoomKey(vodozemac.GroupSession(), time.time())
            await self._inbound_of_own(room_id, found.session)
            self.outbound[room_id] = found
            await self.keep_room_key(room_id)
        return found

    async def _outbound(self, room_id: str) -> OutboundRoomKey | None:
        if room_id not in self.outbound:
            data = json.loads(await self.store.get(f"{self.prefix}out:{room_id}") or "null")
            if data is None:
                return None
            session = vodozemac.GroupSession.from_pickle(data["pickle"], self.key)
            shared = {(u, d) for u, d in data["shared"]}
            self.outbound[room_id] = OutboundRoomKey(session, data["created"], shared)
        return self.outbound[room_id]

    async def rotate(self, room_id: str) -> None:
        """The next message in `room_id` goes under a new session (its membership
        changed: one who left must not read on, one who joined must not read back)."""
        found = await self._outbound(room_id)
        if found is not None and found.created > 0:
            found.created = 0.0
            await self.keep_room_key(room_id)

    async def _inbound_of_own(self, room_id: str, session: vodozemac.GroupSession) -> None:
        """hermes reads its own messages back too (a reply to one names it)."""
        taken = {"type": "m.room_key", "sender": self.user_id, "sender_key": self.curve25519,
                 "content": {"algorithm": MEGOLM, "room_id": room_id,
                             "session_id": session.session_id,
                             "session_key": session.session_key.to_base64()}}  # fmt: skip
        await self.take_room_key(taken)

    async def keep_room_key(self, room_id: str) -> None:
        found = self.outbound[room_id]
        value = json.dumps({"pickle": found.session.pickle(self.key), "created": found.created,
                            "shared": sorted(found.shared)})  # fmt: skip
        await self.store.put(f"{self.prefix}out:{room_id}", value)

    def share_content(self, room_id: str, found: OutboundRoomKey) -> dict[str, Any]:
        """The m.room_key content that gives a device the session from its next message."""
        return {"algorithm": MEGOLM, "room_id": room_id, "session_id": found.session.session_id,
                "session_key": found.session.session_key.to_base64()}  # fmt: skip

    async def encrypt_event(
        self, room_id: str, found: OutboundRoomKey, type_: str, content: dict[str, Any]
    ) -> dict[str, Any]:
        """The `m.room.encrypted` content of an event (its relation left in the clear,
        as the spec says, so servers can aggregate threads); the session's advance is
        kept before the event leaves."""
        payload = {"type": type_, "content": content, "room_id": room_id}
        ciphertext = found.session.encrypt(canonical(payload)).to_base64()
        await self.keep_room_key(room_id)
        encrypted = {"algorithm": MEGOLM, "sender_key": self.curve25519,
                     "ciphertext": ciphertext, "session_id": found.session.session_id,
                     "device_id": self.device_id}  # fmt: skip
        if isinstance(content.get("m.relates_to"), dict):
            encrypted["m.relates_to"] = content["m.relates_to"]
        return encrypted


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))
