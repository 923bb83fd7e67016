"""End-to-end encryption over the homeserver: hermes's device keys published (never over
another client's) and its one-time keys kept topped up, room keys taken from to-device
messages of trusted devices, room events decrypted, and a send in an encrypted room
encrypted after the room's key has reached every trusted device of every member.

One lock orders everything that advances the sessions (the sync loop's to-device
messages and notices, the outbox's sends): they share the Olm sessions and the room's
Megolm session, and two of them at once would reuse a message index.

A message whose key has not come waits for it, kept in state.db with the sync that
brought it: it is answered when the key comes (an `m.room_key`, or an
`m.forwarded_room_key` from the device that made the session). If it has not come within
`key_wait`, the sender, if the config allows them and it is a DM, is told that hermes
could not read it, and their devices are asked for the key (an `m.room_key_request`);
the notice is a fixed text sent once, under a transaction id of its own, not an answer,
so it is not the outbox's. It goes on waiting a day; at most MAX_WAITING wait.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

import attrs
import httpx
import trio

from hermes.adapters.base import AdapterFatal
from hermes.adapters.matrix.api import MatrixError, as_dict, call, txn_id
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
    OutboundRoomKey,
    device_of,
    signed_by,
)

log = logging.getLogger(__name__)

MAX_WAITING = 100  # undecryptable events kept waiting for their keys; the oldest go first
KEEP_WAITING = 86_400.0  # seconds an undecryptable event waits in all
TOP_UP_PAUSE = 600.0  # seconds before another try after keys/upload was refused
COULD_NOT_READ = (
    "I could not read that message: its encryption key has not reached me. I asked your"
    " devices for it; if it comes, I will answer."
)
RoomSettings = dict[str, dict[str, Any] | None]  # m.room.encryption by room (None: clear)


@attrs.frozen
class Waiting:
    """An event that came before its key."""

    room_id: str
    event: dict[str, Any]
    session_id: str
    sender_key: str
    since: float  # wall time it came
    told: bool = False


async def encryption_of(
    http: httpx.AsyncClient, base: str, room_id: str, rooms: RoomSettings
) -> dict[str, Any] | None:
    """The room's m.room.encryption content (None: a room in the clear), asked once and
    then kept in `rooms`, which the sync also updates."""
    if room_id not in rooms:
        try:
            found = await call(http, base, "GET", f"rooms/{room_id}/state/m.room.encryption")
        except MatrixError as exc:
            if exc.status != 404:
                raise
            found = None
        rooms[room_id] = found if found is None or found.get("algorithm") == MEGOLM else None
    return rooms[room_id]


class Encryption:
    """hermes's device in encrypted rooms (one per connection)."""

    def __init__(
        self,
        olm: Olm,
        config: MatrixConfig,
        base: str,
        rooms: RoomSettings,
        tell: Callable[[str, str], bool],
    ) -> None:
        self.olm = olm
        self.config = config
        self.base = base
        self.rooms = rooms
        self.tell = tell  # (sender, room): whether to tell them of what hermes cannot read
        self.lock = trio.Lock()
        self.joined: set[str] = set()  # rooms hermes is in: room keys for others are not kept
        self.devices: dict[str, list[Device]] = {}  # by user, refreshed when they change
        self.members: dict[str, list[str]] = {}  # by room
        self.waiting: dict[str, Waiting] = {}  # by event id
        self.waiting_key = f"{olm.prefix}waiting"
        self.waiting_changed = False
        self.top_up_after = 0.0

    # -- the device ------------------------------------------------------------------------

    async def start(self, http: httpx.AsyncClient) -> None:
        """The account loaded (or made); its device keys published unless the server has
        them already (another client's keys on this device: fatal, never replaced); the
        rooms hermes is in; the events that were waiting for keys."""
        try:
            await self.olm.load()
        except CryptoError as exc:
            raise AdapterFatal(str(exc)) from exc  # no restart opens it with another key
        me, device = self.olm.user_id, self.olm.device_id
        query = {"device_keys": {me: [device]}}
        held = as_dict(
            as_dict(
                (await call(http, self.base, "POST", "keys/query", query)).get("device_keys")
            ).get(me)
        ).get(device)
        keys = as_dict(as_dict(held).get("keys"))
        if held and keys.get(f"ed25519:{device}") != self.olm.ed25519:
            raise AdapterFatal(
                f"device {device} has encryption keys of another client (Element's?): give"
                " hermes a device of its own (a password login, or a token made for a new"
                " device)"
            )
        if not held:
            body = {"device_keys": self.olm.device_keys()}
            await call(http, self.base, "POST", "keys/upload", body)
        joined = await call(http, self.base, "GET", "joined_rooms")
        self.joined = {r for r in joined.get("joined_rooms", []) if isinstance(r, str)}
        kept = json.loads(await self.olm.store.get(self.waiting_key) or "[]")
        self.waiting = {w["event"]["event_id"]: Waiting(**w) for w in kept}

    async def top_up(self, http: httpx.AsyncClient, batch: dict[str, Any]) -> None:
        """Publish one-time keys when the server holds fewer than a quarter of what the
        account can, and a fallback key when the last one was used. A refusal is logged
        and tried again later: receiving goes on."""
        counts = as_dict(batch.get("device_one_time_keys_count"))
        held = counts.get(OTK, 0) if isinstance(counts.get(OTK, 0), int) else 0
        unused = batch.get("device_unused_fallback_key_types")
        fallback = isinstance(unused, list) and OTK not in unused
        low = held < self.olm.me.max_number_of_one_time_keys // 4
        if (
            not (low or fallback or self.olm.me.one_time_keys)
            or self.olm.clock.now() < self.top_up_after
        ):
            return
        async with self.lock:
            body = await self.olm.new_one_time_keys(held, fallback)
            try:
                await call(http, self.base, "POST", "keys/upload", body)
            except MatrixError as exc:
                log.warning(
                    "publishing one-time keys failed (%s); again in %.0f s", exc, TOP_UP_PAUSE
                )
                self.top_up_after = self.olm.clock.now() + TOP_UP_PAUSE
                return
            await self.olm.published()

    def devices_changed(self, users: list[Any]) -> None:
        for user in users:
            self.devices.pop(user, None)

    async def membership_changed(self, room_id: str) -> None:
        self.members.pop(room_id, None)
        async with self.lock:
            await self.olm.rotate(room_id)
            await self.olm.flush()

    # -- receiving -------------------------------------------------------------------------

    async def to_device(self, http: httpx.AsyncClient, events: list[Any]) -> set[str]:
        """Take the room keys to-device messages carry from trusted devices: the rooms
        they are for. Each message's effects (its Olm session's advance, its key) commit
        together. A message that does not open is anyone's bytes: logged and skipped; a
        failure to reach the homeserver (checking a sender's device) is the
        connection's, and the batch comes again."""
        rooms: set[str] = set()
        async with self.lock:
            for event in events:
                if not isinstance(event, dict) or event.get("type") != "m.room.encrypted":
                    continue
                try:
                    room = await self._room_key_of(http, event)
                except (MatrixError, httpx.HTTPError, AdapterFatal):
                    raise
                except Exception as exc:  # a stranger's bytes, whatever they break
                    log.warning("a to-device message from %s: %s", event.get("sender"), exc)
                    room = None
                await self.olm.flush()
                if room is not None:
                    rooms.add(room)
        return rooms

    async def _room_key_of(self, http: httpx.AsyncClient, event: dict[str, Any]) -> str | None:
        payload = await self.olm.decrypt_to_device(event)
        if payload.get("type") not in ("m.room_key", "m.forwarded_room_key"):
            return None
        device = await self._sending_device(http, payload)
        if device is None:
            return None
        room = as_dict(payload.get("content")).get("room_id")
        if room not in self.joined:
            log.info(
                "a room key from %s for %s, a room hermes is not in: not kept", device.user_id, room
            )
            return None
        return await self.olm.take_room_key(payload, device)

    async def _sending_device(
        self, http: httpx.AsyncClient, payload: dict[str, Any]
    ) -> Device | None:
        """The trusted device of the payload's sender whose keys sent it: its curve25519
        the Olm session's, its ed25519 the one the payload claims."""
        sender, curve = payload["sender"], payload["sender_key"]
        claimed = as_dict(payload.get("keys")).get("ed25519")
        found = [d for d in await self._devices_of(http, [sender]) if d.curve25519 == curve]
        if not found:  # a device new since the last query
            self.devices.pop(sender, None)
            found = [d for d in await self._devices_of(http, [sender]) if d.curve25519 == curve]
        device = found[0] if found else None
        if device is None or device.ed25519 != claimed:
            log.warning("a room key from %s by a device their keys do not show: not taken", sender)
            return None
        if not await self.olm.trust(device) or not self._verified(device):
            return None
        await self.olm.known(device)  # its Olm sessions no longer a stranger's
        return device

    async def decrypt(self, room_id: str, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event an encrypted one carries; None when it waits for its key or must not
        be read."""
        try:
            return await self.olm.decrypt_room_event(room_id, event)
        except MissingKey as exc:
            event_id = event.get("event_id")
            if isinstance(event_id, str) and event_id not in self.waiting:
                self.waiting[event_id] = Waiting(
                    room_id, event, exc.session_id, exc.sender_key, self.olm.clock.now()
                )
                self.waiting_changed = True
            return None
        except CryptoError as exc:
            log.warning("%s in %s: %s", event.get("event_id"), room_id, exc)
            return None

    def forget(self, event_id: Any) -> None:
        """A waiting event its sender redacted: never answered."""
        if self.waiting.pop(event_id, None) is not None:
            self.waiting_changed = True

    async def keep_waiting(self) -> None:
        """What waits, kept (before the sync that brought it is committed)."""
        if len(self.waiting) > MAX_WAITING:
            oldest = sorted(self.waiting.values(), key=lambda w: w.since)
            for gone in oldest[: len(self.waiting) - MAX_WAITING]:
                log.warning(
                    "%s waited too long behind newer ones: not answered", gone.event.get("event_id")
                )
                del self.waiting[gone.event["event_id"]]
        if self.waiting_changed:
            value = json.dumps([attrs.asdict(w) for w in self.waiting.values()])
            await self.olm.store.put_many({self.waiting_key: value})
            self.waiting_changed = False

    async def unlocked(self, rooms: set[str] | None) -> list[tuple[str, dict[str, Any]]]:
        """Waiting events whose keys are now here (of `rooms`, which just got keys; None:
        all of them, as at a start: a replayed batch brings no key twice): (room, event);
        the caller drops them with `done` once admitted."""
        opened = []
        for waiting in list(self.waiting.values()):
            if rooms is not None and waiting.room_id not in rooms:
                continue
            if not await self.olm.has_room_key(waiting.room_id, waiting.session_id):
                continue
            event = await self.decrypt(waiting.room_id, waiting.event)
            if event is None:  # refused, or an index earlier than the key's: it waits on
                continue
            opened.append((waiting.room_id, event))
        return opened

    async def done(self, event_ids: list[str]) -> None:
        for event_id in event_ids:
            self.forget(event_id)
        await self.keep_waiting()

    async def overdue(self, http: httpx.AsyncClient) -> None:
        """Tell the senders of events that waited `key_wait` (and ask for their keys),
        once; forget those that waited a day. A notice that fails is logged, not tried
        again: it is a courtesy, and the event still waits."""
        now = self.olm.clock.now()
        for event_id, waiting in list(self.waiting.items()):
            if now - waiting.since >= KEEP_WAITING:
                self.forget(event_id)
            elif not waiting.told and now - waiting.since >= self.config.key_wait:
                self.waiting[event_id] = attrs.evolve(waiting, told=True)
                self.waiting_changed = True
                sender = waiting.event.get("sender")
                if isinstance(sender, str) and self.tell(sender, waiting.room_id):
                    try:
                        await self._tell(http, waiting, sender)
                    except (MatrixError, httpx.HTTPError) as exc:
                        log.warning("telling %s of %s failed: %s", sender, event_id, exc)
        await self.keep_waiting()

    async def _tell(self, http: httpx.AsyncClient, waiting: Waiting, sender: str) -> None:
        event_id = waiting.event["event_id"]
        log.warning(
            "%s from %s in %s: its key has not come; asking for it",
            event_id,
            sender,
            waiting.room_id,
        )
        request = {
            "action": "request",
            "requesting_device_id": self.olm.device_id,
            "request_id": txn_id(f"key-request:{event_id}"),
            "body": {
                "algorithm": MEGOLM,
                "room_id": waiting.room_id,
                "sender_key": waiting.sender_key,
                "session_id": waiting.session_id,
            },
        }
        path = f"sendToDevice/m.room_key_request/{request['request_id']}"
        await call(http, self.base, "PUT", path, {"messages": {sender: {"*": request}}})
        quoted = {"m.in_reply_to": {"event_id": event_id}}
        content = {"msgtype": "m.notice", "body": COULD_NOT_READ, "m.relates_to": quoted}
        kind, sealed = await self.seal(http, waiting.room_id, "m.room.message", content)
        path = f"rooms/{waiting.room_id}/send/{kind}/{txn_id(f'could-not-read:{event_id}')}"
        await call(http, self.base, "PUT", path, sealed)

    # -- sending ---------------------------------------------------------------------------

    async def seal(
        self, http: httpx.AsyncClient, room_id: str, type_: str, content: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """An event's type and content as they go to `room_id`: encrypted (after the room
        key reached every trusted device of its members) when the room is encrypted."""
        settings = await encryption_of(http, self.base, room_id, self.rooms)
        if settings is None:
            return type_, content
        period_ms = _int(settings.get("rotation_period_ms"), ROTATION_MS)
        period_msgs = _int(settings.get("rotation_period_msgs"), ROTATION_MSGS)
        async with self.lock:
            key = await self.olm.room_key(room_id, period_ms, period_msgs)
            await self._share(http, room_id, key)
            return "m.room.encrypted", await self.olm.encrypt_event(room_id, key, type_, content)

    async def _share(self, http: httpx.AsyncClient, room_id: str, key: OutboundRoomKey) -> None:
        devices = [
            d
            for d in await self._devices_in(http, room_id)
            if (d.user_id, d.device_id) not in key.shared
        ]
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
        await self.olm.flush()  # the sessions' advance, before the messages leave
        if messages:
            path = f"sendToDevice/m.room.encrypted/{secrets.token_hex(16)}"
            await call(http, self.base, "PUT", path, {"messages": messages})
        key.shared.update(given)
        self.olm.keep_room_key(room_id, key)
        await self.olm.flush()

    async def _devices_of(self, http: httpx.AsyncClient, users: list[str]) -> list[Device]:
        """The devices of `users` whose keys are well formed and self-signed (asked once,
        and again when a sync says they changed)."""
        unknown = [u for u in users if u not in self.devices]
        if unknown:
            body = {"device_keys": {u: [] for u in unknown}}
            keys = as_dict(
                (await call(http, self.base, "POST", "keys/query", body)).get("device_keys")
            )
            for user in unknown:
                devices = [device_of(user, d, k) for d, k in as_dict(keys.get(user)).items()]
                self.devices[user] = [d for d in devices if d is not None]
        return [d for u in users for d in self.devices.get(u, [])]

    async def _devices_in(self, http: httpx.AsyncClient, room_id: str) -> list[Device]:
        """Every trusted device of the room's joined members, but hermes's own."""
        if room_id not in self.members:
            joined = await call(http, self.base, "GET", f"rooms/{room_id}/joined_members")
            self.members[room_id] = [u for u in as_dict(joined.get("joined")) if isinstance(u, str)]
        trusted = []
        for device in await self._devices_of(http, self.members[room_id]):
            if (device.user_id, device.device_id) == (self.olm.user_id, self.olm.device_id):
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
        (a device the server has no good key for gets no room key, and is logged)."""
        wanted: dict[str, dict[str, str]] = {}
        for device in devices:
            if not await self.olm.has_olm(device):
                wanted.setdefault(device.user_id, {})[device.device_id] = OTK
        if not wanted:
            return
        claimed = as_dict(
            (await call(http, self.base, "POST", "keys/claim", {"one_time_keys": wanted})).get(
                "one_time_keys"
            )
        )
        for device in devices:
            if device.device_id not in wanted.get(device.user_id, {}):
                continue
            keys = as_dict(as_dict(claimed.get(device.user_id)).get(device.device_id))
            key_id = f"ed25519:{device.device_id}"
            one = next(
                (
                    k
                    for k in keys.values()
                    if isinstance(k, dict) and signed_by(k, device.user_id, key_id, device.ed25519)
                ),
                {},
            )
            try:
                if not isinstance(one.get("key"), str):
                    raise CryptoError("no signed one-time key to claim")
                await self.olm.start_olm(device, one["key"])
            except CryptoError as exc:
                log.warning(
                    "%s's device %s gets no room key: %s", device.user_id, device.device_id, exc
                )


def _int(value: Any, default: int) -> int:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and value > 0 else default
