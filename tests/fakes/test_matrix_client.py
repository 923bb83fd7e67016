"""Tests of the Element-like test client (tests/fakes/matrix_client.py) against the fake
homeserver: two (or three) clients in one encrypted room read each other's messages, the
homeserver sees only ciphertext, and the key exchange follows the spec (one-time keys
claimed and topped up, Olm sessions reused, late keys, rotation). Each client is driven
from the test's thread; waits are syncs that long-poll, never sleeps."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import vodozemac as vz

from tests.fakes.matrix import (
    ALICE,
    ALICE_DEVICE,
    ALICE_TOKEN,
    BOB,
    BOB_DEVICE,
    BOB_TOKEN,
    HERMES,
    HERMES_DEVICE,
    HERMES_TOKEN,
    MEGOLM,
    FakeMatrix,
)
from tests.fakes.matrix_client import (
    OLM,
    ONE_TIME_KEYS,
    SIGNED_CURVE25519,
    ElementClient,
    canonical_json,
)

pytestmark = pytest.mark.timeout(30)

CAROL = "@carol:test.local"
CAROL_TOKEN = "syt_Y2Fyb2w_fake_carol_token"
CAROL_DEVICE = "CAROLDEV"


@pytest.fixture
def hs() -> Iterator[FakeMatrix]:
    with FakeMatrix() as fake:
        yield fake
        assert fake.internal_errors == []


@pytest.fixture
def alice(hs: FakeMatrix) -> Iterator[ElementClient]:
    with ElementClient(hs.url, ALICE, ALICE_TOKEN, ALICE_DEVICE) as client:
        yield client


@pytest.fixture
def bob(hs: FakeMatrix) -> Iterator[ElementClient]:
    with ElementClient(hs.url, BOB, BOB_TOKEN, BOB_DEVICE) as client:
        yield client


def olm_types(hs: FakeMatrix, sender: str, user: str) -> list[int]:
    """The Olm message types of the m.room.encrypted to-device messages `sender` sent
    `user`, in order."""
    wanted = (sender, user, "m.room.encrypted")
    return [next(iter(m["content"]["ciphertext"].values()))["type"] for m in hs.to_device_sent
            if (m["sender"], m["user"], m["type"]) == wanted]  # fmt: skip


def test_start_uploads_self_signed_device_keys_and_one_time_keys(
    hs: FakeMatrix, alice: ElementClient
):
    alice.start()
    [device] = [d for d in hs.devices if d["device_id"] == ALICE_DEVICE]
    keys = device["keys"]
    assert keys["algorithms"] == [OLM, MEGOLM]
    assert keys["keys"] == {f"curve25519:{ALICE_DEVICE}": alice.curve25519,
                            f"ed25519:{ALICE_DEVICE}": alice.ed25519}  # fmt: skip
    signature = keys["signatures"][ALICE][f"ed25519:{ALICE_DEVICE}"]
    bare = {k: v for k, v in keys.items() if k != "signatures"}
    vz.Ed25519PublicKey.from_base64(alice.ed25519).verify_signature(
        canonical_json(bare), vz.Ed25519Signature.from_base64(signature))  # fmt: skip
    assert len(device["one_time_keys"]) == ONE_TIME_KEYS
    assert all(k.startswith(f"{SIGNED_CURVE25519}:") for k in device["one_time_keys"])
    assert list(device["fallback_keys"]) == [SIGNED_CURVE25519]
    assert device["fallback_keys"][SIGNED_CURVE25519]["key"]["fallback"] is True
    assert alice.next_batch is not None


def test_an_encrypted_message_and_a_threaded_answer(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB], "secret", encrypted=True)
    alice.start()
    bob.start()
    root = alice.send_text(room, "the launch code is 0000", mentions=[BOB])
    [got] = bob.wait_messages(room, 1, sender=ALICE)
    assert (got.event_id, got.sender, got.type) == (root, ALICE, "m.room.message")
    assert got.encrypted
    assert got.content == {"msgtype": "m.text", "body": "the launch code is 0000",
                           "m.mentions": {"user_ids": [BOB]}}  # fmt: skip
    [wire] = [e for e in hs.timeline(room) if e["event_id"] == root]
    assert wire["type"] == "m.room.encrypted"
    assert wire["content"]["algorithm"] == MEGOLM
    assert wire["content"]["sender_key"] == alice.curve25519
    assert "launch code" not in json.dumps(wire)
    assert [s["encrypted_room"] for s in hs.sent] == [True]

    answer = bob.send_text(room, "thanks", thread_id=root)
    [reply] = alice.wait_messages(room, 1, sender=BOB)
    assert reply.event_id == answer and reply.encrypted
    relation = {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
                "m.in_reply_to": {"event_id": root}}  # fmt: skip
    assert reply.content["m.relates_to"] == relation
    [wire] = [e for e in hs.timeline(room) if e["event_id"] == answer]
    assert wire["content"]["m.relates_to"] == relation  # in the clear, for the server
    assert "thanks" not in json.dumps(wire)
    # the sender reads its own messages too, as Element does
    assert [m.event_id for m in alice.messages(room, ALICE)] == [root]
    assert alice.undecrypted == [] and bob.undecrypted == []


def test_a_plain_room_is_sent_in_the_clear(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([BOB], public=True)
    alice.start()
    bob.start()
    assert alice.join(room) == room
    first = alice.send_text(room, "hello")
    reply = alice.send_text(room, "again", reply_to=first, txn_id="t1")
    assert alice.send_text(room, "again", reply_to=first, txn_id="t1") == reply  # deduplicated
    got = bob.wait_messages(room, 2, sender=ALICE)
    assert [(m.content["body"], m.encrypted) for m in got] == [("hello", False),
                                                               ("again", False)]  # fmt: skip
    assert got[1].content["m.relates_to"] == {"m.in_reply_to": {"event_id": first}}
    assert [s["type"] for s in hs.sent] == ["m.room.message"] * 2
    assert hs.to_device_sent == []


def test_a_late_room_key_decrypts_the_waiting_event(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB], encrypted=True)
    alice.start()
    bob.start()
    early = alice.send_text(room, "before the key", share_key=False)
    later = alice.send_text(room, "also before the key", share_key=False)
    bob.sync()
    assert [e["event_id"] for e in bob.undecrypted] == [early, later]
    assert bob.messages(room) == []
    alice.share_room_key(room)
    got = bob.wait_messages(room, 2, sender=ALICE)
    assert [m.content["body"] for m in got] == ["before the key", "also before the key"]
    assert bob.undecrypted == []
    alice.send_text(room, "after the key")  # already shared: no second key
    assert len(bob.wait_messages(room, 3, sender=ALICE)) == 3
    assert len(olm_types(hs, ALICE, BOB)) == 1


def test_a_member_joining_after_a_rotation_reads_only_what_follows(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    hs.add_user(CAROL, token=CAROL_TOKEN, device_id=CAROL_DEVICE)
    room = hs.create_room([ALICE, BOB], encrypted=True)
    with ElementClient(hs.url, CAROL, CAROL_TOKEN, CAROL_DEVICE) as carol:
        for client in (alice, bob, carol):
            client.start()
        before = alice.send_text(room, "before carol")
        bob.wait_messages(room, 1, sender=ALICE)
        hs.join(room, CAROL)
        alice.rotate(room)
        after = alice.send_text(room, "after carol")
        [got] = carol.wait_messages(room, 1, sender=ALICE)
        assert (got.event_id, got.content["body"]) == (after, "after carol")
        assert [e["event_id"] for e in carol.undecrypted] == [before]
        assert [m.event_id for m in bob.wait_messages(room, 2, sender=ALICE)] == [before, after]
        sessions = {e["content"]["session_id"] for e in hs.timeline(room)
                    if e["type"] == "m.room.encrypted"}  # fmt: skip
        assert len(sessions) == 2


def test_one_time_keys_are_claimed_then_topped_up(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB], encrypted=True)
    alice.start()
    bob.start()
    alice.send_text(room, "hi")
    [claim] = hs.claims
    assert (claim["by"], claim["user"], claim["device_id"], claim["fallback"]) == (
        ALICE, BOB, BOB_DEVICE, False)  # fmt: skip

    def bobs_keys() -> dict[str, object]:
        return next(d["one_time_keys"] for d in hs.devices if d["device_id"] == BOB_DEVICE)

    assert len(bobs_keys()) == ONE_TIME_KEYS - 1
    bob.wait_messages(room, 1, sender=ALICE)
    assert len(bobs_keys()) == ONE_TIME_KEYS and claim["key_id"] not in bobs_keys()
    assert bob.account.one_time_keys == {}  # all published


def test_the_fallback_key_serves_when_one_time_keys_run_out_and_is_replaced(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB], encrypted=True)
    alice.start()
    bob.start()
    claim = {"one_time_keys": {BOB: {BOB_DEVICE: SIGNED_CURVE25519}}}
    with httpx.Client(base_url=hs.api_url,
                      headers={"Authorization": f"Bearer {HERMES_TOKEN}"}) as hermes:  # fmt: skip
        for _ in range(ONE_TIME_KEYS):  # someone else used them all up
            assert hermes.post("/keys/claim", json=claim).status_code == 200
    alice.send_text(room, "through the fallback key")
    assert hs.claims[-1]["fallback"] is True
    old = hs.claims[-1]["key_id"]
    bob.wait_messages(room, 1, sender=ALICE)
    [device] = [d for d in hs.devices if d["device_id"] == BOB_DEVICE]
    spare = device["fallback_keys"][SIGNED_CURVE25519]
    assert spare["used"] is False and spare["key_id"] != old
    assert len(device["one_time_keys"]) == ONE_TIME_KEYS


def test_olm_sessions_are_reused_both_ways(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB], encrypted=True)
    alice.start()
    bob.start()
    alice.send_text(room, "one")
    bob.wait_messages(room, 1, sender=ALICE)
    bob.send_text(room, "two")  # its key goes through the session Alice opened
    alice.wait_messages(room, 1, sender=BOB)
    alice.rotate(room)
    alice.send_text(room, "three")  # the new key: a normal message, Bob has answered
    assert [m.content["body"] for m in bob.wait_messages(room, 2, sender=ALICE)] == [
        "one", "three"]  # fmt: skip
    assert olm_types(hs, ALICE, BOB) == [0, 1]
    assert olm_types(hs, BOB, ALICE) == [1]
    assert len(hs.claims) == 1  # only Alice's first message claimed a key


def test_a_key_goes_to_every_device_but_the_senders_own(hs: FakeMatrix, alice: ElementClient):
    other_token = hs.add_user(ALICE, device_id="ALICEPHONE")
    room = hs.create_room([ALICE, HERMES], encrypted=True)
    hermes = ElementClient(hs.url, HERMES, HERMES_TOKEN, HERMES_DEVICE)
    phone = ElementClient(hs.url, ALICE, other_token, "ALICEPHONE")
    with hermes, phone:
        for client in (alice, hermes, phone):
            client.start()
        sent = alice.send_text(room, "to all")
        shared = {(m["user"], m["device_id"]) for m in hs.to_device_sent}
        assert shared == {(HERMES, HERMES_DEVICE), (ALICE, "ALICEPHONE")}
        assert hermes.wait_messages(room, 1, sender=ALICE)[0].event_id == sent
        assert phone.wait_messages(room, 1, sender=ALICE)[0].event_id == sent


def test_a_leaver_makes_the_next_send_use_a_new_session(
    hs: FakeMatrix, alice: ElementClient, bob: ElementClient
):
    room = hs.create_room([ALICE, BOB, HERMES], encrypted=True)
    with ElementClient(hs.url, HERMES, HERMES_TOKEN, HERMES_DEVICE) as hermes:
        for client in (alice, bob, hermes):
            client.start()
        alice.send_text(room, "all three")
        hs.leave(room, HERMES)
        alice.send_text(room, "two left")
        assert [m.content["body"] for m in bob.wait_messages(room, 2, sender=ALICE)] == [
            "all three", "two left"]  # fmt: skip
        to_hermes = [m for m in hs.to_device_sent if m["user"] == HERMES]
        assert len(to_hermes) == 1
        sessions = [e["content"]["session_id"] for e in hs.timeline(room)
                    if e["type"] == "m.room.encrypted"]  # fmt: skip
        assert len(set(sessions)) == 2


def test_key_requests_are_kept(hs: FakeMatrix, alice: ElementClient):
    alice.start()
    request = {"action": "request", "requesting_device_id": HERMES_DEVICE, "request_id": "r1",
               "body": {"algorithm": MEGOLM, "room_id": "!r:test.local", "sender_key": "k",
                        "session_id": "s"}}  # fmt: skip
    hs.to_device(ALICE, ALICE_DEVICE, "m.room_key_request", request, sender=HERMES)
    alice.sync()
    assert alice.key_requests == [request]


def test_a_tampered_to_device_message_is_refused(hs: FakeMatrix, alice: ElementClient):
    alice.start()
    hs.to_device(ALICE, ALICE_DEVICE, "m.room.encrypted", {
        "algorithm": OLM, "sender_key": "x",
        "ciphertext": {alice.curve25519: {"type": 1, "body": "AAAA"}},
    }, sender=BOB)  # fmt: skip
    with pytest.raises(ValueError, match="Olm to-device message from @bob"):
        alice.sync()


def test_wait_messages_times_out_naming_what_it_waited_for(hs: FakeMatrix, alice: ElementClient):
    room = hs.create_room([ALICE, BOB], encrypted=True)
    alice.start()
    with pytest.raises(TimeoutError, match=f"read 0 of 1 message.* in {room} from {BOB}"):
        alice.wait_messages(room, 1, sender=BOB, timeout=0.3)
