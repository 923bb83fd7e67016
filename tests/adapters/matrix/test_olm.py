"""hermes's Matrix crypto state (hermes/adapters/matrix/olm.py) against other devices
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

    async def put_many(self, values: dict[str, str]) -> None:
        self.update(values)


async def device(store: Store, user: str, device_id: str, secret: str = SECRET) -> Olm:
    olm = Olm(store, f"{device_id}:", secret, user, device_id)
    await olm.load()
    return olm


def as_device(olm: Olm) -> Device:
    return Device(olm.user_id, olm.device_id, olm.curve25519, olm.ed25519)


async def olm_message(sender: Olm, to: Olm, kind: str, content: dict, to_device=None) -> dict:
    """A to-device event from `sender` to `to` carrying `kind`/`content` (`to_device`:
    the recipient as the sender believes it, its keys)."""
    if not await sender.has_olm(as_device(to)):
        body = await to.new_one_time_keys(0, fallback=False)
        one_time = next(iter(body["one_time_keys"].values()))
        await to.published()
        await sender.start_olm(as_device(to), one_time["key"])
    sealed = await sender.encrypt_for(to_device or as_device(to), kind, content)
    return {"sender": sender.user_id, "type": "m.room.encrypted", "content": sealed}


async def shared(sender: Olm, to: Olm) -> dict:
    """`sender`'s room key for ROOM, brought to `to` by Olm: the to-device event."""
    key = await sender.room_key(ROOM, 10**9, 100)
    return await olm_message(sender, to, "m.room_key", sender.share_content(ROOM, key))


async def taken(hermes: Olm, event: dict, by: Olm) -> str | None:
    payload = await hermes.decrypt_to_device(event)
    return await hermes.take_room_key(payload, as_device(by))


async def room_event(sender: Olm, text: str, claimed: str | None = None, n: int = 0) -> dict:
    key = await sender.room_key(ROOM, 10**9, 100)
    content = await sender.encrypt_event(ROOM, key, "m.room.message",
                                         {"msgtype": "m.text", "body": text})  # fmt: skip
    return {"type": "m.room.encrypted", "sender": claimed or sender.user_id,
            "event_id": f"$e{n}", "content": content}  # fmt: skip


async def test_a_room_key_opens_its_senders_events_and_no_one_elses():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    assert await taken(hermes, await shared(bob, hermes), bob) == ROOM
    read = await hermes.decrypt_room_event(ROOM, await room_event(bob, "hi"))
    assert read["type"] == "m.room.message" and read["content"]["body"] == "hi"
    with pytest.raises(CryptoError, match="with @bob:test.local's session"):
        forged = await room_event(bob, "I am Alice", claimed=ALICE, n=1)
        await hermes.decrypt_room_event(ROOM, forged)


async def test_an_event_before_its_key_is_missing_a_key():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    with pytest.raises(MissingKey):
        await hermes.decrypt_room_event(ROOM, await room_event(bob, "too early"))


async def test_a_replayed_ciphertext_under_another_event_id_is_refused():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    await taken(hermes, await shared(bob, hermes), bob)
    event = await room_event(bob, "pay Bob 5")
    await hermes.decrypt_room_event(ROOM, event)
    await hermes.decrypt_room_event(ROOM, event)  # the same event again: fine
    with pytest.raises(CryptoError, match="replays message 0"):
        await hermes.decrypt_room_event(ROOM, {**event, "event_id": "$again"})


async def test_an_olm_message_from_someone_else_than_its_payload_says_is_refused():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    forged = await shared(bob, hermes)
    forged["sender"] = ALICE  # the server says Alice; the sealed payload says Bob
    with pytest.raises(CryptoError, match="not from @alice"):
        await hermes.decrypt_to_device(forged)


async def test_an_olm_message_for_another_device_of_the_same_user_is_refused():
    store = Store()
    hermes, other, bob = (await device(store, HERMES, "H"), await device(store, HERMES, "H2"),
                          await device(store, BOB, "B"))  # fmt: skip
    believed = Device(HERMES, "H", hermes.curve25519, other.ed25519)  # H's session, H2's keys
    meant = await olm_message(bob, hermes, "m.room_key", {}, to_device=believed)
    with pytest.raises(CryptoError, match="for another device"):
        await hermes.decrypt_to_device(meant)


@pytest.mark.parametrize("ciphertext", [["poison"], "poison", {"x": 1}, None])
async def test_a_malformed_to_device_message_is_a_crypto_error(ciphertext):
    hermes = await device(Store(), HERMES, "H")
    content = {"algorithm": "m.olm.v1.curve25519-aes-sha2", "sender_key": "x",
               "ciphertext": ciphertext}  # fmt: skip
    with pytest.raises(CryptoError):
        await hermes.decrypt_to_device({"sender": BOB, "content": content})


async def test_a_copy_of_a_session_from_another_user_never_replaces_it():
    store = Store()
    hermes, alice, bob = (await device(store, HERMES, "H"), await device(store, ALICE, "A"),
                          await device(store, BOB, "B"))  # fmt: skip
    key = await alice.room_key(ROOM, 10**9, 100)
    early = alice.share_content(ROOM, key)  # what Bob got at index 0
    await room_event(alice, "first")
    assert await taken(hermes, await shared(alice, hermes), alice) == ROOM  # at index 1
    stolen = await olm_message(bob, hermes, "m.room_key", early)
    assert await taken(hermes, stolen, bob) is None
    read = await hermes.decrypt_room_event(ROOM, await room_event(alice, "second", n=2))
    assert read["content"]["body"] == "second"


async def test_a_forwarded_key_is_taken_only_from_the_device_that_made_the_session():
    store = Store()
    hermes, alice, bob = (await device(store, HERMES, "H"), await device(store, ALICE, "A"),
                          await device(store, BOB, "B"))  # fmt: skip
    key = await alice.room_key(ROOM, 10**9, 100)
    exported = alice.inbound[(ROOM, key.session.session_id)].session.export_at(0)
    forwarded = {"algorithm": "m.megolm.v1.aes-sha2", "room_id": ROOM,
                 "session_id": key.session.session_id, "session_key": exported.to_base64(),
                 "sender_key": alice.curve25519, "sender_claimed_ed25519_key": alice.ed25519,
                 "forwarding_curve25519_key_chain": []}  # fmt: skip
    by_bob = await olm_message(bob, hermes, "m.forwarded_room_key", forwarded)
    assert await taken(hermes, by_bob, bob) is None
    by_alice = await olm_message(alice, hermes, "m.forwarded_room_key", forwarded)
    assert await taken(hermes, by_alice, alice) == ROOM
    assert (await hermes.decrypt_room_event(ROOM, await room_event(alice, "hi")))["content"]


async def test_a_device_is_trusted_with_the_keys_first_seen_under_its_id_across_restarts():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    assert await hermes.trust(as_device(bob))
    await hermes.flush()
    again = await device(store, HERMES, "H")  # after a restart
    impostor = await device(Store(), BOB, "B")  # new keys under Bob's device id
    assert await again.trust(as_device(bob))
    assert not await again.trust(as_device(impostor))


async def test_the_state_opens_only_with_its_key_and_holds_no_key_in_the_clear():
    store = Store()
    hermes, bob = await device(store, HERMES, "H"), await device(store, BOB, "B")
    await taken(hermes, await shared(bob, hermes), bob)
    await hermes.flush()
    session_key = bob.share_content(ROOM, await bob.room_key(ROOM, 10**9, 100))["session_key"]
    assert not any(session_key[:20] in value for value in store.values())
    reopened = await device(store, HERMES, "H")
    assert reopened.ed25519 == hermes.ed25519  # the same device
    assert (await reopened.decrypt_room_event(ROOM, await room_event(bob, "still")))["content"]
    with pytest.raises(CryptoError, match="does not open with this pickle key"):
        await device(store, HERMES, "H", secret="another passphrase")


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
