"""End-to-end encryption over the homeserver: hermes's device keys published and its
one-time keys kept topped up, room keys taken from to-device messages, room events
decrypted, and a send in an encrypted room encrypted after the room's key has reached
every device of every member (the devices hermes trusts).

A message whose key has not come waits for it, kept in state.db with the sync that
brought it: it is answered when the key comes. If it has not come within `key_wait`, an
allowed sender is told that hermes could not read it, and their devices are asked for
the key (an `m.room_key_request`); it goes on waiting a day. At most MAX_WAITING wait.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import attrs
import httpx

from hermes.adapters.base import AdapterFatal
from hermes.adapters.http import HttpAnswer
from hermes.adapters.matrix.api import as_dict, client_url, error_of, txn_id
from hermes.adapters.matrix.config import MatrixConfig
from hermes.adapters.matrix.olm import (
    MEGOLM,
    OTK,
    ROTATION_MS,
    ROTATION_MSGS,
    CryptoError,
    Device,
    MissingKey,
    Olm,
    device_of,
    signed_by,
)

log = logging.getLogger(__name__)

MAX_WAITING = 100  # undecryptable events kept waiting for their keys; the oldest go first
KEEP_WAITING = 86_400.0  # seconds an undecryptable event waits in all
COULD_NOT_READ = (
    "I could not read that message: its encryption key has not reached me. I asked your"
    " devices for it; if it comes, I will answer."
)


@attrs.frozen
class Waiting:
    """An event that came before its key."""

    room_id: str
    event: dict[str, Any]
    session_id: str
    sender_key: str
    since: float  # wall time it came
    told: bool = False


class Encryption:
    """hermes's device in encrypted rooms (one per adapter incarnation)."""

    def __init__(
        self, olm: Olm, config: MatrixConfig, base: str, allowed: Callable[[str], bool]
    ) -> None:
        self.olm = olm
        self.config = config
        self.base = base
        self.allowed = allowed  # whether a sender may be told of what hermes cannot read
        self.devices: dict[str, list[Device]] = {}  # by user, refreshed when they change
        self.members: dict[str, list[str]] = {}  # by room
        self.rooms: dict[str, dict[str, Any] | None] = {}  # m.room.encryption by room
        self.waiting: dict[str, Waiting] = {}  # by event id
        self.waiting_key = f"{olm.prefix}waiting"

    # -- the device ------------------------------------------------------------------------

    async def start(self, http: httpx.AsyncClient) -> None:
        """The account loaded (or made); its device keys published; the events that were
        waiting for keys loaded."""
        try:
            await self.olm.load()
        except CryptoError as exc:
            raise AdapterFatal(str(exc)) from exc  # no restart opens it with another key
        keys = {"device_keys": self.olm.device_keys()}
        answer = await _post(http, self.base, "keys/upload", keys)
        if answer.status == 400:
            raise AdapterFatal(
                f"the homeserver holds other encryption keys for device {self.olm.device_id}"
                f" ({error_of('keys/upload', answer)}): give hermes a device of its own"
                " (a password login, or a token made for a new device)"
            )
        _checked("keys/upload", answer)
        kept = json.loads(await self.olm.store.get(self.waiting_key) or "[]")
        self.waiting = {w["event"]["event_id"]: Waiting(**w) for w in kept}

    async def top_up(self, http: httpx.AsyncClient, batch: dict[str, Any]) -> None:
        """Publish one-time keys when the server holds fewer than half as many as the
        account can, and a fallback key when the last one was used."""
        counts = batch.get("device_one_time_keys_count")
        held = counts.get(OTK, 0) if isinstance(counts, dict) else 0
        unused = batch.get("device_unused_fallback_key_types")
        fallback = isinstance(unused, list) and OTK not in unused
        most = self.olm.account.max_number_of_one_time_keys // 2
        wanted = most - held if isinstance(held, int) and held < most // 2 else 0
        if wanted <= 0 and not fallback and not self.olm.account.one_time_keys:
            return
        body = await self.olm.new_one_time_keys(wanted, fallback)
        _checked("keys/upload", await _post(http, self.base, "keys/upload", body))
        await self.olm.published()

    def devices_changed(self, users: list[Any]) -> None:
        for user in users:
            self.devices.pop(user, None)

    async def membership_changed(self, room_id: str) -> None:
        self.members.pop(room_id, None)
        await self.olm.rotate(room_id)

    def encryption_seen(self, room_id: str, content: dict[str, Any]) -> None:
        if content.get("algorithm") == MEGOLM:
            self.rooms[room_id] = content

    # -- receiving -------------------------------------------------------------------------

    async def to_device(self, events: list[Any]) -> set[str]:
        """Take the room keys to-device messages carry: the rooms they are for."""
        rooms: set[str] = set()
        for event in events:
            if not isinstance(event, dict) or event.get("type") != "m.room.encrypted":
                continue
            try:
                payload = await self.olm.decrypt_to_device(event)
            except CryptoError as exc:
                log.warning("a to-device message from %s: %s", event.get("sender"), exc)
                continue
            room = await self.olm.take_room_key(payload)
            if room is not None:
                rooms.add(room)
        return rooms

    async def decrypt(self, room_id: str, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event an encrypted one carries; None when it waits for its key or must not
        be read."""
        try:
            return await self.olm.decrypt_room_event(room_id, event)
        except MissingKey as exc:
            if isinstance(event.get("event_id"), str) and event["event_id"] not in self.waiting:
                self.waiting[event["event_id"]] = Waiting(
                    room_id, event, exc.session_id, exc.sender_key, time.time()
                )
            return None
        except CryptoError as exc:
            log.warning("%s in %s: %s", event.get("event_id"), room_id, exc)
            return None

    async def keep_waiting(self) -> None:
        """What waits, kept (before the sync that brought it is committed)."""
        if len(self.waiting) > MAX_WAITING:
            oldest = sorted(self.waiting.values(), key=lambda w: w.since)
            for gone in oldest[: len(self.waiting) - MAX_WAITING]:
                log.warning("%s waited too long behind newer ones: not answered",
                            gone.event.get("event_id"))  # fmt: skip
                del self.waiting[gone.event["event_id"]]
        value = json.dumps([attrs.asdict(w) for w in self.waiting.values()])
        await self.olm.store.put(self.waiting_key, value)

    async def unlocked(self, rooms: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """Waiting events of `rooms` that their keys now open: (room, event); the caller
        drops them with `done` once admitted."""
        opened = []
        for waiting in list(self.waiting.values()):
            if waiting.room_id not in rooms:
                continue
            try:
                event = await self.olm.decrypt_room_event(waiting.room_id, waiting.event)
            except MissingKey:
                continue
            except CryptoError as exc:
                log.warning("%s: %s", waiting.event.get("event_id"), exc)
                del self.waiting[waiting.event["event_id"]]
                continue
            opened.append((waiting.room_id, event))
        return opened

    async def done(self, event_ids: list[str]) -> None:
        if any(self.waiting.pop(e, None) for e in event_ids):
            await self.keep_waiting()

    async def overdue(self, http: httpx.AsyncClient) -> None:
        """Tell the senders of events that waited `key_wait` (and ask for their keys);
        forget those that waited a day."""
        now, changed = time.time(), False
        for event_id, waiting in list(self.waiting.items()):
            if now - waiting.since >= KEEP_WAITING:
                del self.waiting[event_id]
                changed = True
            elif not waiting.told and now - waiting.since >= self.config.key_wait:
                await self._tell(http, waiting)
                self.waiting[event_id] = attrs.evolve(waiting, told=True)
                changed = True
        if changed:
            await self.keep_waiting()

    async def _tell(self, http: httpx.AsyncClient, waiting: Waiting) -> None:
        sender = waiting.event.get("sender")
        if not isinstance(sender, str) or not self.allowed(sender):
            return
        log.warning("%s from %s in %s: its key has not come; asking for it",
                    waiting.event.get("event_id"), sender, waiting.room_id)  # fmt: skip
        request = {
            "action": "request", "requesting_device_id": self.olm.device_id,
            "request_id": txn_id(f"key-request:{waiting.event['event_id']}"),
            "body": {"algorithm": MEGOLM, "room_id": waiting.room_id,
                     "sender_key": waiting.sender_key, "session_id": waiting.session_id},
        }  # fmt: skip
        body = {"messages": {sender: {"*": request}}}
        path = f"sendToDevice/m.room_key_request/{request['request_id']}"
        _checked("sendToDevice", await _post(http, self.base, path, body, "PUT"))
        quoted = {"m.in_reply_to": {"event_id": waiting.event["event_id"]}}
        content = {"msgtype": "m.notice", "body": COULD_NOT_READ, "m.relates_to": quoted}
        kind, sent = await self.seal(http, waiting.room_id, "m.room.message", content)
        url = client_url(self.base, "rooms", waiting.room_id, "send", kind,
                         txn_id(f"could-not-read:{waiting.event['event_id']}"))  # fmt: skip
        _checked("send", HttpAnswer.of(await http.put(url, json=sent)))

    # -- sending ---------------------------------------------------------------------------

    async def encryption_of(self, http: httpx.AsyncClient, room_id: str) -> dict[str, Any] | None:
        """The room's m.room.encryption content, None for a room in the clear."""
        if room_id not in self.rooms:
            url = client_url(self.base, "rooms", room_id, "state", "m.room.encryption")
            answer = HttpAnswer.of(await http.get(url))
            if answer.status == 404:
                self.rooms[room_id] = None
            else:
                self.encryption_seen(room_id, _checked("state", answer))
        return self.rooms.get(room_id)

    async def seal(
        self, http: httpx.AsyncClient, room_id: str, type_: str, content: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """An event's type and content as they go to `room_id`: encrypted (after the room
        key reached every trusted device of its members) when the room is encrypted."""
        settings = await self.encryption_of(http, room_id)
        if settings is None:
            return type_, content
        period_ms = _int(settings.get("rotation_period_ms"), ROTATION_MS)
        period_msgs = _int(settings.get("rotation_period_msgs"), ROTATION_MSGS)
        key = await self.olm.room_key(room_id, period_ms, period_msgs)
        await self._share(http, room_id, key)
        return "m.room.encrypted", await self.olm.encrypt_event(room_id, key, type_, content)

    async def _share(self, http: httpx.AsyncClient, room_id: str, key: Any) -> None:
        devices = [d for d in await self._devices_in(http, room_id)
                   if (d.user_id, d.device_id) not in key.shared]  # fmt: skip
        if not devices:
            return
        await self._olm_with(http, devices)
        content = self.olm.share_content(room_id, key)
        messages: dict[str, dict[str, Any]] = {}
        given = []
        for device in devices:
            if await self.olm.has_olm(device):
                sealed = await self.olm.encrypt_for(device, "m.room_key", content)
                messages.setdefault(device.user_id, {})[device.device_id] = sealed
                given.append((device.user_id, device.device_id))
        if messages:
            path = f"sendToDevice/m.room.encrypted/{secrets.token_hex(16)}"
            body = {"messages": messages}
            _checked("sendToDevice", await _post(http, self.base, path, body, "PUT"))
        key.shared.update(given)
        await self.olm.keep_room_key(room_id)

    async def _devices_in(self, http: httpx.AsyncClient, room_id: str) -> list[Device]:
        """Every trusted device of the room's joined members, but hermes's own."""
        if room_id not in self.members:
            url = client_url(self.base, "rooms", room_id, "joined_members")
            joined = _checked("joined_members", HttpAnswer.of(await http.get(url)))
            self.members[room_id] = [u for u in as_dict(joined.get("joined")) if isinstance(u, str)]
        users = self.members[room_id]
        unknown = [u for u in users if u not in self.devices]
        if unknown:
            body = {"device_keys": {u: [] for u in unknown}}
            found = _checked("keys/query", await _post(http, self.base, "keys/query", body))
            keys = as_dict(found.get("device_keys"))
            for user in unknown:
                devices = [device_of(user, d, k) for d, k in as_dict(keys.get(user)).items()]
                self.devices[user] = [d for d in devices if d is not None]
        trusted = []
        for user in users:
            for device in self.devices.get(user, []):
                if device.device_id == self.olm.device_id and user == self.olm.user_id:
                    continue
                if await self.olm.trust(device) and self._verified(device):
                    trusted.append(device)
        return trusted

    def _verified(self, device: Device) -> bool:
        if self.config.trust == "tofu":
            return True
        return device.ed25519 in self.config.verified_devices

    async def _olm_with(self, http: httpx.AsyncClient, devices: list[Device]) -> None:
        """An Olm session with each device that has none, from a one-time key it signed
        (a device the server has no key for gets no room key, and is logged)."""
        wanted: dict[str, dict[str, str]] = {}
        for device in devices:
            if not await self.olm.has_olm(device):
                wanted.setdefault(device.user_id, {})[device.device_id] = OTK
        if not wanted:
            return
        body = {"one_time_keys": wanted}
        claimed = as_dict(_checked("keys/claim", await _post(http, self.base, "keys/claim", body))
                        .get("one_time_keys"))  # fmt: skip
        for device in devices:
            if device.device_id not in wanted.get(device.user_id, {}):
                continue
            keys = as_dict(as_dict(claimed.get(device.user_id)).get(device.device_id))
            one = next((k for k in keys.values() if isinstance(k, dict)
                        and signed_by(k, device.user_id, f"ed25519:{device.device_id}",
                                      device.ed25519)), None)  # fmt: skip
            if one is None or not isinstance(one.get("key"), str):
                log.warning("%s's device %s has no one-time key to claim: it gets no room key",
                            device.user_id, device.device_id)  # fmt: skip
                continue
            await self.olm.start_olm(device, one["key"])


async def _post(
    http: httpx.AsyncClient, base: str, path: str, body: dict[str, Any], method: str = "POST"
) -> HttpAnswer:
    url = client_url(base, *path.split("/"))
    return HttpAnswer.of(await http.request(method, url, json=body))


def _checked(what: str, answer: HttpAnswer) -> dict[str, Any]:
    if answer.status == 200 and isinstance(answer.body, dict):
        return answer.body
    raise error_of(what, answer)


def _int(value: Any, default: int) -> int:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and value > 0 else default
