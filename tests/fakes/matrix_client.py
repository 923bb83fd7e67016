"""A Matrix client for the end-to-end tests that behaves as Element would in an encrypted
room: it speaks the real client-server API (to the fake homeserver of
tests/fakes/matrix.py, or any other) and does Olm/Megolm with vodozemac as the spec says,
so whatever it can talk to, a spec-following client can too. Its attachments are
encrypted as Element's are (AES-256-CTR, a JWK key, an EncryptedFile in `file`)."""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import secrets
import time
from typing import Any
from urllib.parse import quote

import attrs
import httpx
import vodozemac as vz
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

OLM = "m.olm.v1.curve25519-aes-sha2"
MEGOLM = "m.megolm.v1.aes-sha2"
SIGNED_CURVE25519 = "signed_curve25519"
ONE_TIME_KEYS = 10  # kept on the server; topped up after each sync that shows fewer
POLL_MS = 2000  # wait_messages' long-poll


def canonical_json(value: Any) -> bytes:
    """The spec's canonical JSON: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def unpadded_b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode().rstrip("=")


def b64decode(text: str) -> bytes:
    """Unpadded (or padded) standard base64, as Matrix writes it."""
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _field(obj: Any, key: str, kind: type, what: str) -> Any:
    """`obj[key]`, which must be a `kind`; else ValueError naming `what`."""
    if not isinstance(obj, dict):
        raise ValueError(f"{what}: not a JSON object: {obj!r}")
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"{what}: {key!r} is not a {kind.__name__}: {obj!r}")
    return value


@attrs.frozen
class Received:
    """A room event the client read: decrypted (`encrypted`) or in the clear."""

    room_id: str
    event_id: str
    sender: str
    type: str
    content: dict[str, Any]
    encrypted: bool


@attrs.frozen
class _Device:
    """Another device's keys, self-signature verified."""

    user_id: str
    device_id: str
    curve25519: str
    ed25519: str


@attrs.define
class _Outbound:
    session: vz.GroupSession
    shared: set[tuple[str, str]] = attrs.Factory(set)  # (user, device) given its key
    delayed_key: str | None = None  # the key as of the first send that did not share it


@attrs.define
class _Inbound:
    session: vz.InboundGroupSession
    sender: str  # the user whose device sent the room key
    indices: dict[int, str] = attrs.Factory(dict)  # message index -> event id (replays)


class ElementClient:
    """One device of one user, doing what Element does with an encrypted room, blocking
    (httpx.Client; call it from one thread at a time).

    `start()` uploads signed device keys, one-time keys and a fallback key, then syncs.
    `sync()` decrypts Olm to-device messages (m.room_key into inbound Megolm sessions;
    `m.room_key_request` kept in `key_requests`), forgets the device keys of users in
    `device_lists.changed`, reads which rooms are encrypted, decrypts Megolm timeline
    events into `received` (the ones whose key is unknown wait in `undecrypted` and are
    retried when a key comes; other non-state events go there in the clear, and
    `messages()`/`wait_messages()` count the m.room.message ones) and tops up one-time
    and fallback keys. It reads its own messages too (it keeps each outbound session's
    key inbound, as Element does), so filter by sender. `send_text()` (and `send_file()`,
    whose file is uploaded encrypted there; `download()` reads one back)
    encrypts in an encrypted room, first sharing the outbound session's key over Olm with
    every device of every joined member not given it yet (asking `joined_members` at
    that moment, so a join not yet synced is not missed).

    Where it knowingly differs from Element: no cross-signing, no verification, no key
    backup, no forwarded keys (`m.forwarded_room_key`), no answer to key requests, no
    `m.room_key.withheld`; it trusts every device whose keys are self-signed; it keeps
    nothing on disk; it does not rotate after `rotation_period_ms/msgs` (only when a
    member it gave the key to has left, or on `rotate()`). A malformed answer or message
    raises ValueError/AssertionError naming the problem, where Element would log it.
    """

    def __init__(
        self,
        homeserver_url: str,
        user_id: str,
        access_token: str,
        device_id: str,
        *,
        one_time_keys: int = ONE_TIME_KEYS,
    ) -> None:
        self.user_id, self.device_id = user_id, device_id
        self.one_time_keys = one_time_keys
        base = homeserver_url.rstrip("/")
        if not base.endswith("/_matrix/client/v3"):
            base += "/_matrix/client/v3"
        self.root = base.removesuffix("/_matrix/client/v3")  # the media paths are beside it
        self._http = httpx.Client(base_url=base, timeout=httpx.Timeout(10),
                                  headers={"Authorization": f"Bearer {access_token}"})  # fmt: skip
        self.account = vz.Account()
        self.curve25519 = self.account.curve25519_key.to_base64()
        self.ed25519 = self.account.ed25519_key.to_base64()
        self.received: list[Received] = []
        self.undecrypted: list[dict[str, Any]] = []  # timeline events, with room_id
        self.key_requests: list[dict[str, Any]] = []
        self.encrypted_rooms: dict[str, dict[str, Any]] = {}  # room -> m.room.encryption
        self.next_batch: str | None = None
        self._olm: dict[str, list[vz.Session]] = {}  # their curve25519 -> sessions, best last
        self._inbound: dict[tuple[str, str, str], _Inbound] = {}  # (room, sender_key, id)
        self._outbound: dict[str, _Outbound] = {}
        self._devices: dict[str, dict[str, _Device]] = {}  # user -> device -> keys
        self._seen: set[str] = set()
        self._txns = itertools.count(1)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Upload the device keys, one-time keys and a fallback key; an initial sync."""
        device_keys = self._signed({
            "user_id": self.user_id, "device_id": self.device_id,
            "algorithms": [OLM, MEGOLM],
            "keys": {f"curve25519:{self.device_id}": self.curve25519,
                     f"ed25519:{self.device_id}": self.ed25519},
        })  # fmt: skip
        self._upload_keys(self.one_time_keys, fallback=True, device_keys=device_keys)
        self.sync()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ElementClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, Any] | None = None,
        read: float = 10,
    ) -> dict[str, Any]:
        """One API call; its JSON object, or AssertionError naming the call and answer."""
        timeout = httpx.Timeout(10, read=read)
        answer = self._http.request(method, path, json=body, params=params, timeout=timeout)
        if answer.status_code != 200:
            raise AssertionError(f"{self.user_id}: {method} {path} answered "
                                 f"{answer.status_code}: {answer.text}")  # fmt: skip
        try:
            parsed = answer.json()
        except ValueError as exc:
            raise ValueError(f"{method} {path} answered no JSON: {answer.text!r}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"{method} {path} answered no JSON object: {parsed!r}")
        return parsed

    def _txn(self) -> str:
        return f"{self.device_id}.{time.time_ns()}.{next(self._txns)}"

    def join(self, room_id: str) -> str:
        """Join a room (an id or an alias); its room id."""
        answer = self._call("POST", f"/join/{quote(room_id, safe='')}", {})
        return _field(answer, "room_id", str, "join")

    # -- own keys -------------------------------------------------------------------------

    def _signed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` with this device's signature (over it without signatures and unsigned)."""
        bare = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
        signature = self.account.sign(canonical_json(bare)).to_base64()
        signed = copy.deepcopy(obj)
        signed.setdefault("signatures", {}).setdefault(self.user_id, {})[
            f"ed25519:{self.device_id}"] = signature  # fmt: skip
        return signed

    def _upload_keys(
        self, count: int, *, fallback: bool, device_keys: dict[str, Any] | None = None
    ) -> None:
        """Upload `count` new signed one-time keys (and a new fallback key)."""
        body: dict[str, Any] = {}
        if device_keys is not None:
            body["device_keys"] = device_keys
        if count > 0:
            self.account.generate_one_time_keys(count)
            body["one_time_keys"] = {
                f"{SIGNED_CURVE25519}:{key_id}": self._signed({"key": key.to_base64()})
                for key_id, key in self.account.one_time_keys.items()
            }  # fmt: skip
        if fallback:
            self.account.generate_fallback_key()
            body["fallback_keys"] = {
                f"{SIGNED_CURVE25519}:{key_id}": self._signed(
                    {"key": key.to_base64(), "fallback": True})
                for key_id, key in self.account.fallback_key.items()
            }  # fmt: skip
        if not body:
            return
        answer = self._call("POST", "/keys/upload", body)
        counts = _field(answer, "one_time_key_counts", dict, "keys/upload")
        if count and counts.get(SIGNED_CURVE25519, 0) < count:
            raise AssertionError(f"keys/upload kept fewer one-time keys than sent: {counts}")
        self.account.mark_keys_as_published()

    # -- sync -----------------------------------------------------------------------------

    def sync(self, timeout_ms: int = 0) -> dict[str, Any]:
        """One /sync from `next_batch`, handled (to-device, device lists, rooms, key
        counts, in that order); its body."""
        params: dict[str, Any] = {"timeout": timeout_ms}
        if self.next_batch is not None:
            params["since"] = self.next_batch
        body = self._call("GET", "/sync", params=params, read=timeout_ms / 1000 + 10)
        next_batch = _field(body, "next_batch", str, "sync")
        for event in (body.get("to_device") or {}).get("events", []):
            self._to_device(event)
        lists = body.get("device_lists") or {}
        for uid in [*lists.get("changed", []), *lists.get("left", [])]:
            self._devices.pop(uid, None)
        rooms = body.get("rooms") or {}
        for room_id, room in (rooms.get("join") or {}).items():
            for event in (room.get("state") or {}).get("events", []):
                self._room_event(room_id, event)
            for event in (room.get("timeline") or {}).get("events", []):
                self._room_event(room_id, event)
        self._top_up(body)
        self.next_batch = next_batch
        return body

    def _top_up(self, body: dict[str, Any]) -> None:
        """New one-time keys when the server holds fewer than `one_time_keys`, and a new
        fallback key once the last was used (as the spec asks)."""
        counts = body.get("device_one_time_keys_count") or {}
        missing = self.one_time_keys - int(counts.get(SIGNED_CURVE25519, 0))
        unused = body.get("device_unused_fallback_key_types")
        used = unused is not None and SIGNED_CURVE25519 not in unused
        if missing > 0 or used:
            self._upload_keys(max(missing, 0), fallback=used)

    def _room_event(self, room_id: str, event: dict[str, Any]) -> None:
        event_id = _field(event, "event_id", str, f"an event of {room_id}")
        kind = _field(event, "type", str, f"event {event_id}")
        content = _field(event, "content", dict, f"event {event_id}")
        if event.get("state_key") is not None:
            if kind == "m.room.encryption" and event["state_key"] == "":
                self.encrypted_rooms[room_id] = content
            return
        if event_id in self._seen:
            return
        self._seen.add(event_id)
        if kind == "m.room.encrypted":
            self._decrypt_room_event({**event, "room_id": room_id})
        else:
            sender = _field(event, "sender", str, f"event {event_id}")
            self.received.append(Received(room_id, event_id, sender, kind, content, False))

    # -- to-device, Olm -------------------------------------------------------------------

    def _to_device(self, event: dict[str, Any]) -> None:
        kind = _field(event, "type", str, "a to-device event")
        content = _field(event, "content", dict, "a to-device event")
        if kind == "m.room_key_request":
            self.key_requests.append(content)
        elif kind == "m.room.encrypted":
            sender = _field(event, "sender", str, "a to-device event")
            sender_key, payload = self._olm_decrypt(sender, content)
            if payload["type"] == "m.room_key":
                self._room_key(sender, sender_key, payload)

    def _olm_decrypt(self, sender: str, content: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The sender's curve25519 key and the checked payload of an Olm message."""
        what = f"an Olm to-device message from {sender}"
        if content.get("algorithm") != OLM:
            raise ValueError(f"{what}: algorithm is not {OLM}: {content!r}")
        sender_key = _field(content, "sender_key", str, what)
        ciphertexts = _field(content, "ciphertext", dict, what)
        mine = ciphertexts.get(self.curve25519)
        if mine is None:
            raise ValueError(f"{what}: no ciphertext for this device's key {self.curve25519}")
        kind = _field(mine, "type", int, what)
        if kind not in (0, 1):
            raise ValueError(f"{what}: message type {kind} is neither 0 nor 1")
        try:
            message = vz.AnyOlmMessage.from_parts(kind, b64decode(_field(mine, "body", str, what)))
        except ValueError as exc:
            raise ValueError(f"{what}: the body is no Olm message: {exc}") from exc
        plaintext = self._olm_plaintext(sender_key, message, what)
        payload = json.loads(plaintext)
        for key, expected in (("sender", sender), ("recipient", self.user_id)):
            if _field(payload, key, str, what) != expected:
                raise ValueError(f"{what}: payload {key} is not {expected}: {payload!r}")
        if _field(payload, "recipient_keys", dict, what).get("ed25519") != self.ed25519:
            raise ValueError(f"{what}: recipient_keys.ed25519 is not this device's")
        claimed = _field(_field(payload, "keys", dict, what), "ed25519", str, what)
        _field(payload, "type", str, what)
        device = next((d for d in self._devices_of([sender]).get(sender, {}).values()
                       if d.curve25519 == sender_key), None)  # fmt: skip
        if device is not None and device.ed25519 != claimed:
            raise ValueError(f"{what}: keys.ed25519 is not the one of {device.device_id}")
        return sender_key, payload

    def _olm_plaintext(self, sender_key: str, message: vz.AnyOlmMessage, what: str) -> bytes:
        """Decrypted by the session it belongs to (which becomes the preferred one), or
        by a new inbound session if it is a pre-key message of none."""
        sessions = self._olm.setdefault(sender_key, [])
        pre_key = message.to_pre_key()
        for session in reversed(sessions):
            if pre_key is not None and not session.session_matches(pre_key):
                continue
            try:
                plaintext = session.decrypt(message)
            except vz.OlmDecryptionException as exc:
                if pre_key is not None:  # the session it was meant for fails
                    raise ValueError(f"{what}: Olm decryption failed: {exc}") from exc
                continue  # a normal message: maybe another session's
            sessions.remove(session)
            sessions.append(session)
            return plaintext
        if pre_key is None:
            raise ValueError(f"{what}: no Olm session with {sender_key} decrypts it")
        key = vz.Curve25519PublicKey.from_base64(sender_key)
        try:
            session, plaintext = self.account.create_inbound_session(key, pre_key)
        except vz.SessionCreationException as exc:
            raise ValueError(f"{what}: no inbound Olm session from it: {exc}") from exc
        sessions.append(session)  # its one-time key is gone from the account now
        return plaintext

    def _olm_encrypt(self, device: _Device, kind: str, content: dict[str, Any]) -> dict[str, Any]:
        session = self._olm[device.curve25519][-1]
        payload = {
            "type": kind, "content": content, "sender": self.user_id,
            "sender_device": self.device_id, "keys": {"ed25519": self.ed25519},
            "recipient": device.user_id, "recipient_keys": {"ed25519": device.ed25519},
        }  # fmt: skip
        message_type, raw = session.encrypt(canonical_json(payload)).to_parts()
        return {"algorithm": OLM, "sender_key": self.curve25519,
                "ciphertext": {device.curve25519: {"type": message_type,
                                                   "body": unpadded_b64(raw)}}}  # fmt: skip

    # -- room keys, Megolm ----------------------------------------------------------------

    def _room_key(self, sender: str, sender_key: str, payload: dict[str, Any]) -> None:
        what = f"an m.room_key from {sender}"
        content = _field(payload, "content", dict, what)
        if content.get("algorithm") != MEGOLM:
            raise ValueError(f"{what}: algorithm is not {MEGOLM}: {content!r}")
        room_id = _field(content, "room_id", str, what)
        session_id = _field(content, "session_id", str, what)
        session = vz.InboundGroupSession(vz.SessionKey(_field(content, "session_key", str, what)))
        if session.session_id != session_id:
            raise ValueError(f"{what}: session_id {session_id} is not the key's own")
        key = (room_id, sender_key, session_id)
        known = self._inbound.get(key)
        if known is None or session.first_known_index < known.session.first_known_index:
            self._inbound[key] = _Inbound(session, sender)
        waiting, self.undecrypted = self.undecrypted, []
        for event in waiting:
            self._decrypt_room_event(event)

    def _decrypt_room_event(self, event: dict[str, Any]) -> None:
        """Record a Megolm event decrypted; keep it in `undecrypted` if its key is unknown."""
        room_id, event_id = event["room_id"], event["event_id"]
        what = f"event {event_id} in {room_id}"
        sender = _field(event, "sender", str, what)
        content = event["content"]
        if content.get("algorithm") != MEGOLM:
            raise ValueError(f"{what}: algorithm is not {MEGOLM}: {content!r}")
        key = (room_id, _field(content, "sender_key", str, what),
               _field(content, "session_id", str, what))  # fmt: skip
        message = vz.MegolmMessage.from_base64(_field(content, "ciphertext", str, what))
        inbound = self._inbound.get(key)
        if inbound is None or message.message_index() < inbound.session.first_known_index:
            self.undecrypted.append(event)
            return
        if inbound.sender != sender:
            raise ValueError(f"{what}: sent by {sender} with a key {inbound.sender} shared")
        try:
            decrypted = inbound.session.decrypt(message)
        except vz.MegolmDecryptionException as exc:
            raise ValueError(f"{what}: Megolm decryption failed: {exc}") from exc
        earlier = inbound.indices.setdefault(decrypted.message_index, event_id)
        if earlier != event_id:
            raise ValueError(f"{what}: replays message index {decrypted.message_index} of "
                             f"{earlier}")  # fmt: skip
        plain = json.loads(decrypted.plaintext)
        if _field(plain, "room_id", str, what) != room_id:
            raise ValueError(f"{what}: the plaintext names room {plain['room_id']}")
        inner = copy.deepcopy(_field(plain, "content", dict, what))
        if "m.relates_to" in content and "m.relates_to" not in inner:
            inner["m.relates_to"] = content["m.relates_to"]
        kind = _field(plain, "type", str, what)
        self.received.append(Received(room_id, event_id, sender, kind, inner, True))

    def _new_outbound(self, room_id: str) -> _Outbound:
        """A new outbound session, its key also kept inbound (to read its own messages)."""
        outbound = _Outbound(vz.GroupSession())
        session_key = outbound.session.session_key.to_base64()
        key = (room_id, self.curve25519, outbound.session.session_id)
        self._inbound[key] = _Inbound(vz.InboundGroupSession(vz.SessionKey(session_key)),
                                      self.user_id)  # fmt: skip
        self._outbound[room_id] = outbound
        return outbound

    def rotate(self, room_id: str) -> None:
        """Discard the room's outbound session: the next send makes a new one."""
        self._outbound.pop(room_id, None)

    # -- devices --------------------------------------------------------------------------

    def _devices_of(self, users: list[str]) -> dict[str, dict[str, _Device]]:
        """The verified device keys of `users` (cached until their device list changes)."""
        wanted = [u for u in dict.fromkeys(users) if u not in self._devices]
        if wanted:
            answer = self._call("POST", "/keys/query", {"device_keys": {u: [] for u in wanted}})
            found = _field(answer, "device_keys", dict, "keys/query")
            for uid in wanted:
                self._devices[uid] = {
                    device_id: self._verified(uid, device_id, keys)
                    for device_id, keys in (found.get(uid) or {}).items()
                }  # fmt: skip
        return {u: self._devices[u] for u in users}

    def _verified(self, uid: str, device_id: str, keys: dict[str, Any]) -> _Device:
        what = f"the device keys of {uid} {device_id}"
        if (keys.get("user_id"), keys.get("device_id")) != (uid, device_id):
            raise ValueError(f"{what}: they name {keys.get('user_id')} {keys.get('device_id')}")
        ids = _field(keys, "keys", dict, what)
        curve = _field(ids, f"curve25519:{device_id}", str, what)
        ed25519 = _field(ids, f"ed25519:{device_id}", str, what)
        _check_signature(keys, uid, device_id, ed25519, what)
        return _Device(uid, device_id, curve, ed25519)

    # -- sending --------------------------------------------------------------------------

    def send_text(
        self,
        room_id: str,
        body: str,
        *,
        thread_id: str | None = None,
        reply_to: str | None = None,
        mentions: list[str] | None = None,
        share_key: bool = True,
        txn_id: str | None = None,
    ) -> str:
        """Send an m.text (encrypted in an encrypted room, the key shared first unless
        `share_key` is false); its event id."""
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if mentions is not None:
            content["m.mentions"] = {"user_ids": list(mentions)}
        if thread_id is not None:  # Element's fallback: a reply to the thread's last event
            content["m.relates_to"] = {
                "rel_type": "m.thread", "event_id": thread_id,
                "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or self._thread_last(room_id, thread_id)},
            }  # fmt: skip
        elif reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return self.send_event(room_id, "m.room.message", content, share_key=share_key,
                               txn_id=txn_id)  # fmt: skip

    def send_event(
        self,
        room_id: str,
        kind: str,
        content: dict[str, Any],
        *,
        share_key: bool = True,
        txn_id: str | None = None,
    ) -> str:
        """Send any room event, encrypted as `send_text` does; its event id."""
        event_type, wire = kind, content
        if self._is_encrypted(room_id):
            outbound = self._outbound.get(room_id) or self._new_outbound(room_id)
            if share_key:
                self.share_room_key(room_id)
                outbound = self._outbound[room_id]  # a leave may have rotated it
            elif outbound.delayed_key is None:  # what Element would have sent by now
                outbound.delayed_key = outbound.session.session_key.to_base64()
            plain = {"type": kind, "content": content, "room_id": room_id}
            ciphertext = outbound.session.encrypt(canonical_json(plain)).to_base64()
            event_type = "m.room.encrypted"
            wire = {"algorithm": MEGOLM, "sender_key": self.curve25519,
                    "ciphertext": ciphertext, "session_id": outbound.session.session_id,
                    "device_id": self.device_id}  # fmt: skip
            if "m.relates_to" in content:  # in the clear too, for the server's relations
                wire["m.relates_to"] = copy.deepcopy(content["m.relates_to"])
        path = (f"/rooms/{quote(room_id, safe='')}/send/{quote(event_type, safe='')}/"
                f"{quote(txn_id or self._txn(), safe='')}")  # fmt: skip
        return _field(self._call("PUT", path, wire), "event_id", str, f"send to {room_id}")

    def send_file(
        self,
        room_id: str,
        data: bytes,
        name: str,
        mime: str,
        *,
        msgtype: str = "m.file",
        caption: str | None = None,
    ) -> str:
        """Upload `data` and send it as `msgtype` (Element's way: in an encrypted room
        the file encrypted, its EncryptedFile in `file`; a caption as `body` beside
        `filename`); its event id."""
        encrypted = self._is_encrypted(room_id)
        sealed: dict[str, Any] | None = None
        body = data
        if encrypted:
            key, iv = secrets.token_bytes(32), secrets.token_bytes(8) + bytes(8)
            encryptor = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
            body = encryptor.update(data) + encryptor.finalize()
            sealed = {"key": {"kty": "oct", "key_ops": ["encrypt", "decrypt"], "alg": "A256CTR",
                              "k": base64.urlsafe_b64encode(key).decode().rstrip("="),
                              "ext": True},
                      "iv": unpadded_b64(iv),
                      "hashes": {"sha256": unpadded_b64(hashlib.sha256(body).digest())},
                      "v": "v2"}  # fmt: skip
        mxc = self.upload(body, "application/octet-stream" if encrypted else mime, name)
        content: dict[str, Any] = {"msgtype": msgtype, "body": caption or name, "filename": name,
                                   "info": {"mimetype": mime, "size": len(data)}}  # fmt: skip
        if sealed is not None:
            content["file"] = {"url": mxc, **sealed}
        else:
            content["url"] = mxc
        return self.send_event(room_id, "m.room.message", content)

    def upload(self, data: bytes, mime: str, name: str) -> str:
        """`POST /_matrix/media/v3/upload`: the `mxc://` URI."""
        answer = self._http.post(f"{self.root}/_matrix/media/v3/upload",
                                 params={"filename": name}, content=data,
                                 headers={"Content-Type": mime})  # fmt: skip
        if answer.status_code != 200:
            raise AssertionError(f"upload answered {answer.status_code}: {answer.text}")
        return _field(answer.json(), "content_uri", str, "upload")

    def download(self, content: dict[str, Any]) -> bytes:
        """The file a media message's content names, from the authenticated endpoint:
        decrypted, its hash checked, when it came encrypted (ValueError when that fails)."""
        sealed = content.get("file")
        url = _field(sealed if isinstance(sealed, dict) else content, "url", str, "a file")
        if not url.startswith("mxc://"):
            raise ValueError(f"{url!r} is not a Matrix media URI")
        answer = self._http.get(f"{self.root}/_matrix/client/v1/media/download/{url[6:]}")
        if answer.status_code != 200:
            raise AssertionError(f"download answered {answer.status_code}: {answer.text}")
        if not isinstance(sealed, dict):
            return answer.content
        what = "an EncryptedFile"
        key = _field(sealed, "key", dict, what)
        if (sealed.get("v"), key.get("alg"), key.get("kty")) != ("v2", "A256CTR", "oct"):
            raise ValueError(f"{what} that is not v2 A256CTR: {sealed!r}")
        digest = b64decode(_field(_field(sealed, "hashes", dict, what), "sha256", str, what))
        if hashlib.sha256(answer.content).digest() != digest:
            raise ValueError("the downloaded ciphertext's sha256 is not the event's")
        k = base64.urlsafe_b64decode(_field(key, "k", str, what) + "==")
        iv = b64decode(_field(sealed, "iv", str, what))
        decryptor = Cipher(algorithms.AES(k), modes.CTR(iv)).decryptor()
        return decryptor.update(answer.content) + decryptor.finalize()

    def _thread_last(self, room_id: str, thread_id: str) -> str:
        last = thread_id
        for got in self.received:
            relation = got.content.get("m.relates_to") or {}
            if got.room_id == room_id and relation.get("rel_type") == "m.thread" and (
                relation.get("event_id") == thread_id
            ):  # fmt: skip
                last = got.event_id
        return last

    def _is_encrypted(self, room_id: str) -> bool:
        if room_id not in self.encrypted_rooms:  # not synced yet, maybe: ask
            path = f"/rooms/{quote(room_id, safe='')}/state/m.room.encryption"
            if self._http.get(path).status_code == 404:
                return False
            self.encrypted_rooms[room_id] = self._call("GET", path)
        algorithm = self.encrypted_rooms[room_id].get("algorithm")
        if algorithm != MEGOLM:
            raise ValueError(f"{room_id} is encrypted with {algorithm!r}, not {MEGOLM}")
        return True

    def share_room_key(self, room_id: str) -> None:
        """Give the room's outbound session key to every joined device not given it yet
        (not this one); a new session first if a member given it has left. The key is
        the one as of the first message sent without sharing it, if any (a late delivery
        of what Element would have sent then), else the session's key now."""
        outbound = self._outbound.get(room_id)
        if outbound is None:
            raise ValueError(f"no outbound session in {room_id}: send something first")
        answer = self._call("GET", f"/rooms/{quote(room_id, safe='')}/joined_members")
        members = list(_field(answer, "joined", dict, f"joined_members of {room_id}"))
        if any(user not in members for user, _ in outbound.shared):
            outbound = self._new_outbound(room_id)  # as Element: a leaver must not read on
        devices = [d for found in self._devices_of(members).values() for d in found.values()
                   if (d.user_id, d.device_id) not in outbound.shared
                   and (d.user_id, d.device_id) != (self.user_id, self.device_id)]  # fmt: skip
        self._open_olm_sessions([d for d in devices if not self._olm.get(d.curve25519)])
        session_key = outbound.delayed_key or outbound.session.session_key.to_base64()
        outbound.delayed_key = None
        content = {"algorithm": MEGOLM, "room_id": room_id,
                   "session_id": outbound.session.session_id,
                   "session_key": session_key}  # fmt: skip
        messages: dict[str, dict[str, Any]] = {}
        for device in devices:
            if self._olm.get(device.curve25519):  # no one-time key claimed: left out
                messages.setdefault(device.user_id, {})[device.device_id] = self._olm_encrypt(
                    device, "m.room_key", content)  # fmt: skip
                outbound.shared.add((device.user_id, device.device_id))
        if messages:
            self._call("PUT", f"/sendToDevice/m.room.encrypted/{quote(self._txn(), safe='')}",
                       {"messages": messages})  # fmt: skip

    def _open_olm_sessions(self, devices: list[_Device]) -> None:
        """Outbound Olm sessions to `devices`, from a claimed one-time key of each."""
        if not devices:
            return
        wanted: dict[str, dict[str, str]] = {}
        for device in devices:
            wanted.setdefault(device.user_id, {})[device.device_id] = SIGNED_CURVE25519
        answer = self._call("POST", "/keys/claim", {"one_time_keys": wanted})
        claimed = _field(answer, "one_time_keys", dict, "keys/claim")
        for device in devices:
            keys = (claimed.get(device.user_id) or {}).get(device.device_id) or {}
            for key_id, key in keys.items():
                what = f"the one-time key {key_id} of {device.user_id} {device.device_id}"
                if not key_id.startswith(f"{SIGNED_CURVE25519}:"):
                    raise ValueError(f"{what}: not a {SIGNED_CURVE25519} key")
                public = _field(key, "key", str, what)
                _check_signature(key, device.user_id, device.device_id, device.ed25519, what)
                session = self.account.create_outbound_session(
                    vz.Curve25519PublicKey.from_base64(device.curve25519),
                    vz.Curve25519PublicKey.from_base64(public))  # fmt: skip
                self._olm.setdefault(device.curve25519, []).append(session)

    # -- waiting --------------------------------------------------------------------------

    def messages(self, room_id: str, sender: str | None = None) -> list[Received]:
        """The m.room.message events read in a room (from `sender`), in order."""
        return [r for r in self.received if r.room_id == room_id and r.type == "m.room.message"
                and sender in (None, r.sender)]  # fmt: skip

    def wait_messages(
        self, room_id: str, count: int, *, sender: str | None = None, timeout: float = 30.0
    ) -> list[Received]:
        """Sync (long-polling) until at least `count` messages were read in the room
        (from `sender`); all of them, in order. TimeoutError naming what it waited for."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.messages(room_id, sender)
            if len(found) >= count:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                waiting = sum(1 for e in self.undecrypted if e["room_id"] == room_id)
                raise TimeoutError(
                    f"{self.user_id} read {len(found)} of {count} message(s) in {room_id}"
                    f"{'' if sender is None else ' from ' + sender} within {timeout:g} s "
                    f"({waiting} event(s) there not decrypted)")  # fmt: skip
            self.sync(timeout_ms=int(min(left * 1000, POLL_MS)))


def _check_signature(
    signed: dict[str, Any], uid: str, device_id: str, ed25519: str, what: str
) -> None:
    """ValueError unless `signed` carries a valid signature of that device's ed25519."""
    signatures = _field(signed, "signatures", dict, what)
    signature = (signatures.get(uid) or {}).get(f"ed25519:{device_id}")
    if not isinstance(signature, str):
        raise ValueError(f"{what}: not signed by ed25519:{device_id}")
    bare = {k: v for k, v in signed.items() if k not in ("signatures", "unsigned")}
    try:
        vz.Ed25519PublicKey.from_base64(ed25519).verify_signature(
            canonical_json(bare), vz.Ed25519Signature.from_base64(signature))  # fmt: skip
    except vz.SignatureException as exc:
        raise ValueError(f"{what}: the signature does not verify") from exc
