"""hermes's Matrix crypto state (hermes/adapters/matrix/olm.py) against another device
made the same way: what it refuses to read, whose devices it trusts, and what its
pickles hold."""

from __future__ import annotations

import pytest

from hermes.adapters.matrix.olm import CryptoError, Device, MissingKey, Olm
from tests.fakes.matrix import ALICE, BOB, HERMES

ROOM = "!room:test.local"
SECRET = "the operator's passphrase"


class Store(dict):
    """state.db's cursors, in memory."""

    async def get(self, key: str) -> str | None:
        return super().get(key)

    async def put(self, key: str, value: str) -> None:
        self[key] = value


async def device(store: Store, user: str, device_id: str) -> Olm:
    olm = Olm(store, f"{device_id}:", SECRET, user, device_id)
    await olm.load()
    return olm


def as_device(olm: Olm) -> Device:
    return Device(olm.user_id, olm.device_id, olm.curve25519, olm.ed25519)


async def shared(sender: Olm, to: Olm, room: str = ROOM) -> dict:
    """`sender`'s room key for `room`, brought to `to` by Olm: the to-device event."""
    body = await to.new_one_time_keys(1, fallback=False)
    [one_time] = body["one_time_keys"].values()
    await to.published()
    await sender.start_olm(as_device(to), one_time["key"])
    key = await sender.room_key(room, 10**9, 100)
    content = await sender.encrypt_for(as_device(to), "m.room_key", sender.share_content(room, key))
    return {"sender": sender.user_id, "type": "m.room.encrypted", "content": content}


async def room_event(sender: Olm, text: str, claimed: str | None = None) -> dict:
    key = await sender.room_key(ROOM, 10**9, 100)
    content = await sender.encrypt_event(ROOM, key, "m.room.message",
                                         {"msgtype": "m.text", "body": text})  # fmt: skip
    return {"type": "m.room.encrypted", "sender": claimed or sender.user_id,
            "event_id": "$e", "content": content}  # fmt: skip


async def test_a_room_key_opens_its_senders_events_and_no_one_elses():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    payload = await hermes.decrypt_to_device(await shared(bob, hermes))
    assert await hermes.take_room_key(payload) == ROOM
    read = await hermes.decrypt_room_event(ROOM, await room_event(bob, "hi"))
    assert read["type"] == "m.room.message" and read["content"]["body"] == "hi"
    with pytest.raises(CryptoError, match="with @bob:test.local's session"):
        await hermes.decrypt_room_event(ROOM, await room_event(bob, "I am Alice", claimed=ALICE))


async def test_an_event_before_its_key_is_missing_a_key():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    with pytest.raises(MissingKey):
        await hermes.decrypt_room_event(ROOM, await room_event(bob, "too early"))


async def test_an_olm_message_from_someone_else_than_its_payload_says_is_refused():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    forged = await shared(bob, hermes)
    forged["sender"] = ALICE  # the server says Alice; the sealed payload says Bob
    with pytest.raises(CryptoError, match="not from @alice"):
        await hermes.decrypt_to_device(forged)


async def test_an_olm_message_for_another_device_is_refused():
    store = Store()
    hermes, other, bob = (await device(store, HERMES, "H"), await device(store, HERMES, "H2"),
                          await device(store, BOB, "B"))  # fmt: skip
    meant = await shared(bob, other)
    meant["content"]["ciphertext"] = {hermes.curve25519: next(iter(
        meant["content"]["ciphertext"].values()))}  # fmt: skip
    with pytest.raises(CryptoError):
        await hermes.decrypt_to_device(meant)


async def test_a_device_is_trusted_with_the_keys_first_seen_under_its_id_across_restarts():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    assert await hermes.trust(as_device(bob))
    again = await device(store, HERMES, "H")  # after a restart
    impostor = await device(Store(), BOB, "B")  # new keys under Bob's device id
    assert await again.trust(as_device(bob))
    assert not await again.trust(as_device(impostor))


async def test_the_state_opens_only_with_its_key_and_holds_no_key_in_the_clear():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    await hermes.take_room_key(await hermes.decrypt_to_device(await shared(bob, hermes)))
    session_key = bob.share_content(ROOM, await bob.room_key(ROOM, 10**9, 100))["session_key"]
    assert not any(session_key[:20] in value for value in store.values())
    reopened = await device(store, HERMES, "H")
    assert reopened.ed25519 == hermes.ed25519  # the same device
    assert (await reopened.decrypt_room_event(ROOM, await room_event(bob, "still")))["content"]
    wrong = Olm(store, "H:", "another passphrase", HERMES, "H")
    with pytest.raises(CryptoError, match="does not open with this pickle key"):
        await wrong.load()


async def test_a_rooms_session_rotates_after_its_messages_and_when_told():
    hermes = await device(Store(), HERMES, "H")
    first = await hermes.room_key(ROOM, 10**9, 2)
    for _ in range(2):
        await hermes.encrypt_event(ROOM, first, "m.room.message", {"body": "x"})
    second = await hermes.room_key(ROOM, 10**9, 2)
    assert second.session.session_id != first.session.session_id
    await hermes.rotate(ROOM)  # someone joined or left
    third = await hermes.room_key(ROOM, 10**9, 2)
    assert third.session.session_id != second.session.session_id
