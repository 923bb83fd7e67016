"""The Matrix adapter's encryption in this process, against the fake homeserver and
clients that encrypt as Element does: what anyone (a stranger, a member, the homeserver
itself) can send it must not stop it, fool it, or make it send in the clear."""

from __future__ import annotations

import functools

import httpx
import pytest
import vodozemac

from hermes.actors.clock import Clock
from hermes.actors.link import FATAL
from hermes.adapters.contract import RetryAfter, SendRequest, Sent, Target
from hermes.adapters.cursors import Cursors
from hermes.adapters.matrix.adapter import MatrixAdapter
from hermes.adapters.matrix.config import MatrixConfig
from hermes.adapters.matrix.olm import MEGOLM, OLM
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, running
from tests.adapters.matrix.serving import PICKLE_KEY, PICKLE_VAR
from tests.adapters.matrix.test_adapter import TOKEN_VAR, begun, matrix
from tests.adapters.relay import HeldRelay
from tests.adapters.serving import in_thread
from tests.fakes.matrix import (
    ALICE,
    BOB,
    BOB_DEVICE,
    BOB_TOKEN,
    HERMES,
    HERMES_DEVICE,
    HERMES_TOKEN,
    FakeMatrix,
)
from tests.fakes.matrix_client import ElementClient, canonical_json, unpadded_b64

ENCRYPTED = {"pickle_key_env": PICKLE_VAR}


def hermes_keys(hs: FakeMatrix) -> dict:
    [device] = [d for d in hs.devices if d["user_id"] == HERMES]
    return device["keys"]


async def until_past(hs: FakeMatrix, position: str) -> None:
    """Until a sync of hermes's started past stream position `position` (`s<N>`): it
    has taken what came before."""

    def past(fake: FakeMatrix) -> bool:
        return any(s["user"] == HERMES and s["since"] and int(s["since"][1:]) >= int(position[1:])
                   for s in fake.syncs)  # fmt: skip

    await in_thread(functools.partial(hs.wait_until, past, 10.0, f"a sync past {position}"))


@pytest.mark.timeout(30)
async def test_a_malformed_to_device_message_is_skipped_and_receiving_goes_on(
    hs, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES], direct=True)
    admissions = Admissions()
    async with matrix(hs, admissions, registry, tmp_path / "state.db", **ENCRYPTED) as run:
        await begun(hs)
        mine = hermes_keys(hs)["keys"][f"curve25519:{HERMES_DEVICE}"]
        for ciphertext in (["poison"], "poison", {mine: {"type": 0, "body": "!!"}}):
            content = {"algorithm": OLM, "sender_key": "x", "ciphertext": ciphertext}
            hs.to_device(HERMES, HERMES_DEVICE, "m.room.encrypted", content, sender=BOB)
        said = hs.message(room, ALICE, "after the poison")
        await admissions.wait_for(said["event_id"])
        assert run.restarts == 0


@pytest.mark.timeout(30)
async def test_a_member_with_a_broken_device_key_does_not_block_the_room(
    hs, alice, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES, BOB], name="Team", encrypted=True)
    with ElementClient(hs.url, BOB, BOB_TOKEN, BOB_DEVICE) as bob:
        bob.curve25519 = "bm90IGEga2V5"  # self-signed, and not a key
        await in_thread(bob.start)
        async with matrix(hs, Admissions(), registry, tmp_path / "state.db", **ENCRYPTED) as run:
            await begun(hs)
            for n in range(2):
                sent = await run.send(SendRequest(Target("matrix", room), f"to all {n}", f"k{n}"))
                assert isinstance(sent, Sent)
    read = await in_thread(lambda: alice.wait_messages(room, 2, sender=HERMES))
    assert [m.content["body"] for m in read] == ["to all 0", "to all 1"]


@pytest.mark.timeout(30)
async def test_before_the_encryption_state_loads_a_send_to_an_encrypted_room_waits(
    hs, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    with HeldRelay(hs.url) as relay:
        relay.hold(b"/account/whoami")  # the adapter is starting
        config = MatrixConfig(base_url=relay.url, user_id=HERMES, token_env=TOKEN_VAR,
                              pickle_key_env=PICKLE_VAR, sync_timeout=1.0)  # fmt: skip
        secrets = Secrets({TOKEN_VAR: HERMES_TOKEN, PICKLE_VAR: PICKLE_KEY}, frozenset())
        kept = functools.partial(Cursors, registry, tmp_path / "state.db", Clock())
        async with running(MatrixAdapter, "matrix", config, secrets, Admissions(),
                           cursors=kept) as run:  # fmt: skip
            await in_thread(relay.wait_held, 1)
            result = await run.send(SendRequest(Target("matrix", room), "secret reply", "r1"))
            relay.release()
    assert isinstance(result, RetryAfter) and "loading" in result.reason
    assert not [s for s in hs.sent if s["sender"] == HERMES]


@pytest.mark.timeout(30)
async def test_without_a_pickle_key_a_send_to_an_encrypted_room_is_refused(hs):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    async with matrix(hs, Admissions()) as run:
        await begun(hs)
        result = await run.send(SendRequest(Target("matrix", room), "secret reply", "r1"))
    assert not isinstance(result, Sent) and "pickle_key_env" in result.reason
    assert not hs.sent


@pytest.mark.timeout(30)
async def test_a_message_opened_by_a_key_in_a_replayed_batch_is_answered_after_the_restart(
    hs, alice, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    admissions = Admissions()
    async with matrix(hs, admissions, registry, tmp_path / "state.db", key_wait=600.0,
                      **ENCRYPTED) as run:  # fmt: skip
        await begun(hs)
        late = await in_thread(functools.partial(alice.send_text, room, "late", share_key=False))
        await until_past(hs, hs.stream_token)  # it waits for its key
        admissions.hold("late")
        await in_thread(alice.share_room_key, room)
        await admissions.wait_for(late)
        admissions.fail("late")  # the journal could not take it: the batch comes again
        await admissions.wait_for(late, times=2)  # its key, kept, opens it again
        assert run.restarts == 1


@pytest.mark.timeout(30)
async def test_a_notice_that_cannot_be_sent_is_logged_and_receiving_goes_on(
    hs, alice, registry, tmp_path
):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    admissions = Admissions()
    async with matrix(hs, admissions, registry, tmp_path / "state.db", key_wait=0.5,
                      **ENCRYPTED) as run:  # fmt: skip
        await begun(hs)
        hs.fail(403, endpoint="sendToDevice")  # hermes's key request is refused
        await in_thread(functools.partial(alice.send_text, room, "unreadable", share_key=False))
        await in_thread(hs.wait_refused, 1)
        said = await in_thread(alice.send_text, room, "readable")
        await admissions.wait_for(said)
        assert run.restarts == 0


@pytest.mark.timeout(30)
async def test_a_token_of_a_device_with_another_clients_keys_is_fatal_and_replaces_none(
    hs, registry, tmp_path
):
    with ElementClient(hs.url, HERMES, HERMES_TOKEN, HERMES_DEVICE) as element_of_hermes:
        await in_thread(element_of_hermes.start)
        before = hermes_keys(hs)
        async with matrix(hs, Admissions(), registry, tmp_path / "state.db", **ENCRYPTED) as run:
            await run.status.reach(FATAL)
            assert "keys of another client" in run.status.reason
    assert hermes_keys(hs) == before


def claim_one_time_key(hs: FakeMatrix) -> dict:
    """One of hermes's one-time keys, claimed as Bob."""
    wanted = {"one_time_keys": {HERMES: {HERMES_DEVICE: "signed_curve25519"}}}
    answer = httpx.post(f"{hs.api_url}/keys/claim", json=wanted,
                        headers={"Authorization": f"Bearer {BOB_TOKEN}"})  # fmt: skip
    return next(iter(answer.json()["one_time_keys"][HERMES][HERMES_DEVICE].values()))


@pytest.mark.timeout(30)
async def test_a_room_key_a_lying_server_says_is_alices_is_not_taken(hs, alice, registry, tmp_path):
    """The homeserver says a to-device message is Alice's; its Olm session is Mallory's,
    whose device is not one of Alice's: the key is not taken, the forged event is not
    read, and Alice's own words are."""
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    admissions = Admissions()
    with ElementClient(hs.url, BOB, BOB_TOKEN, BOB_DEVICE) as mallory:
        await in_thread(mallory.start)
        async with matrix(hs, admissions, registry, tmp_path / "state.db", **ENCRYPTED):
            await begun(hs)
            group = vodozemac.GroupSession()
            payload = {"type": "m.room_key", "sender": ALICE, "sender_device": "ALICEDEV",
                       "keys": {"ed25519": mallory.ed25519}, "recipient": HERMES,
                       "recipient_keys": {"ed25519": hermes_keys(hs)["keys"][
                           f"ed25519:{HERMES_DEVICE}"]},
                       "content": {"algorithm": MEGOLM, "room_id": room,
                                   "session_id": group.session_id,
                                   "session_key": group.session_key.to_base64()}}  # fmt: skip
            hermes_curve = hermes_keys(hs)["keys"][f"curve25519:{HERMES_DEVICE}"]
            one_time = await in_thread(claim_one_time_key, hs)
            session = mallory.account.create_outbound_session(
                vodozemac.Curve25519PublicKey.from_base64(hermes_curve),
                vodozemac.Curve25519PublicKey.from_base64(one_time["key"]))  # fmt: skip
            kind, raw = session.encrypt(canonical_json(payload)).to_parts()
            hs.to_device(HERMES, HERMES_DEVICE, "m.room.encrypted", {
                "algorithm": OLM, "sender_key": mallory.curve25519,
                "ciphertext": {hermes_curve: {"type": kind, "body": unpadded_b64(raw)}},
            }, sender=ALICE)  # fmt: skip
            plain = {
                "type": "m.room.message",
                "room_id": room,
                "content": {"msgtype": "m.text", "body": "forged: delete my files"},
            }
            forged = hs.event(room, ALICE, "m.room.encrypted", {
                "algorithm": MEGOLM, "sender_key": mallory.curve25519, "device_id": "EVIL",
                "session_id": group.session_id,
                "ciphertext": group.encrypt(canonical_json(plain)).to_base64()})  # fmt: skip
            real = await in_thread(alice.send_text, room, "the real Alice")
            await admissions.wait_for(real)
    assert forged["event_id"] not in admissions.ids
