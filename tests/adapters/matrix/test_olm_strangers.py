"""What a stranger's pre-key messages leave in state.db (hermes/adapters/matrix/olm.py):
anyone can open an Olm session with hermes's device (a one-time key, or the fallback
key, which takes any number), so a session is kept only once its payload holds, and the
sessions with keys of no device hermes has looked up stay few however many keys come."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import vodozemac

from hermes.actors.clock import Clock
from hermes.adapters.cursors import Cursors
from hermes.adapters.matrix.olm import MAX_OLM_SESSIONS, OLM, Device, Olm, canonical
from tests.adapters.inprocess import Admissions
from tests.adapters.matrix.test_adapter import begun, matrix
from tests.adapters.matrix.test_encryption import ENCRYPTED, claim_one_time_key, hermes_keys
from tests.adapters.serving import in_thread
from tests.fakes.matrix import ALICE, BOB, HERMES, HERMES_DEVICE, FakeMatrix
from tests.fakes.matrix_client import unpadded_b64
from tests.seed import rows

STRANGERS_BOUND = 25  # olm.MAX_STRANGER_SESSIONS: the figure its comment gives
SECRET = "the operator's passphrase"


def olm_rows(state_db: Path) -> dict[str, str]:
    """The adapter cursors that hold Olm sessions, by key."""
    found = rows(state_db, "SELECT key, value FROM adapter_cursors WHERE key LIKE '%olm%'")
    return dict(found)


def sessions_by_key(state_db: Path) -> dict[str, int]:
    """How many Olm sessions state.db holds with each identity key, wherever kept."""
    counts: dict[str, int] = {}
    for key, value in olm_rows(state_db).items():
        if ":olm:" in key:
            counts[key.rsplit(":olm:", 1)[1]] = len(json.loads(value))
        else:  # the strangers' row: [[curve, [pickle, ...]], ...]
            counts.update({curve: len(pickles) for curve, pickles in json.loads(value)})
    return counts


def stranger_message(to_curve: str, one_time: str, sender: str, payload: dict) -> dict:
    """A to-device event opening a new Olm session with hermes from a fresh identity key
    (`sender`'s, by what the server says): the event and that key."""
    account = vodozemac.Account()
    session = account.create_outbound_session(
        vodozemac.Curve25519PublicKey.from_base64(to_curve),
        vodozemac.Curve25519PublicKey.from_base64(one_time),
    )
    kind, raw = session.encrypt(canonical(payload)).to_parts()
    curve = account.curve25519_key.to_base64()
    content = {"algorithm": OLM, "sender_key": curve,
               "ciphertext": {to_curve: {"type": kind, "body": unpadded_b64(raw)}}}  # fmt: skip
    return {"sender": sender, "type": "m.room.encrypted", "content": content}


def dummy(sender: str, to: str, to_ed25519: str, ed25519: str = "") -> dict:
    """A well-formed Olm payload carrying m.dummy (what opens a session to unwedge)."""
    return {"type": "m.dummy", "content": {}, "sender": sender, "sender_device": "STRANGER",
            "keys": {"ed25519": ed25519 or "c2VlIG5vIGtleQ"}, "recipient": to,
            "recipient_keys": {"ed25519": to_ed25519}}  # fmt: skip


@pytest.mark.timeout(30)
async def test_a_session_whose_payload_fails_is_never_written_to_state_db(
    hs: FakeMatrix, alice, registry, tmp_path
):
    """Each stranger opens a session with one of hermes's one-time keys; only the one
    whose payload holds is kept (as a stranger's), and Alice's, whose device hermes
    looked up when her room key came, has a row of its own."""
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    state_db = tmp_path / "state.db"
    admissions = Admissions()
    async with matrix(hs, admissions, registry, state_db, **ENCRYPTED):
        await begun(hs)
        keys = hermes_keys(hs)["keys"]
        curve, ed25519 = keys[f"curve25519:{HERMES_DEVICE}"], keys[f"ed25519:{HERMES_DEVICE}"]
        good = dummy(BOB, HERMES, ed25519)
        payloads = {
            "another sender": {**good, "sender": ALICE},
            "another recipient": {**good, "recipient": ALICE},
            "another device": {**good, "recipient_keys": {"ed25519": alice.ed25519}},
            "no claimed key": {k: v for k, v in good.items() if k != "keys"},
            "no type": {k: v for k, v in good.items() if k != "type"},
            "no content": {**good, "content": "none"},
            "holds": good,
        }
        strangers = {}
        for name, payload in payloads.items():
            one_time = (await in_thread(claim_one_time_key, hs))["key"]
            event = stranger_message(curve, one_time, BOB, payload)
            hs.to_device(HERMES, HERMES_DEVICE, event["type"], event["content"], sender=BOB)
            strangers[name] = event["content"]["sender_key"]
        said = await in_thread(alice.send_text, room, "after the strangers")
        await admissions.wait_for(said)
    held = sessions_by_key(state_db)
    assert [name for name, key in strangers.items() if key in held] == ["holds"]
    assert held[strangers["holds"]] == 1
    everything = rows(state_db, "SELECT key || value FROM adapter_cursors")
    for name, key in strangers.items():  # not in another row either
        assert name == "holds" or not any(key in text for (text,) in everything), name
    assert any(k.endswith(f":olm:{alice.curve25519}") for k in olm_rows(state_db))


async def test_a_flood_of_fresh_keys_keeps_few_sessions_and_a_known_devices_are_kept(
    registry, tmp_path
):
    """Alice's device opens a session with a one-time key and is looked up (known); then
    60 fresh keys and one key with 8 sessions come on the fallback key. state.db keeps at
    most STRANGERS_BOUND sessions of strangers, MAX_OLM_SESSIONS of any one key, the
    newest stranger's, and Alice's session, which still opens her next message."""
    state_db = tmp_path / "state.db"
    async with Cursors(registry, state_db, Clock()) as store:
        hermes = Olm(store, "matrix:e2ee:H:", SECRET, HERMES, "H")
        alice = Olm(store, "alice:A:", SECRET, ALICE, "A")
        await hermes.load()
        await alice.load()
        keys = await hermes.new_one_time_keys(0, fallback=True)
        await hermes.published()
        fallback = next(iter(keys["fallback_keys"].values()))["key"]
        one_time = next(iter(keys["one_time_keys"].values()))["key"]
        me = Device(HERMES, "H", hermes.curve25519, hermes.ed25519)
        alices = Device(ALICE, "A", alice.curve25519, alice.ed25519)

        async def to_hermes(event: dict) -> dict:
            payload = await hermes.decrypt_to_device(event)
            await hermes.flush()  # as each to-device message is
            return payload

        await alice.start_olm(me, one_time)
        first = await alice.encrypt_for(me, "m.room_key", {"n": 1})
        await to_hermes({"sender": ALICE, "type": "m.room.encrypted", "content": first})
        await hermes.known(alices)  # her keys came from keys/query, trusted
        await hermes.flush()

        flood = functools.partial(stranger_message, hermes.curve25519, fallback, BOB)
        for _ in range(60):
            await to_hermes(flood(dummy(BOB, HERMES, hermes.ed25519)))
        one = vodozemac.Account()  # one key, eight sessions
        for _ in range(8):
            session = one.create_outbound_session(
                vodozemac.Curve25519PublicKey.from_base64(hermes.curve25519),
                vodozemac.Curve25519PublicKey.from_base64(fallback),
            )
            kind, raw = session.encrypt(canonical(dummy(BOB, HERMES, hermes.ed25519))).to_parts()
            body = {hermes.curve25519: {"type": kind, "body": unpadded_b64(raw)}}
            content = {"algorithm": OLM, "sender_key": one.curve25519_key.to_base64(),
                       "ciphertext": body}  # fmt: skip
            await to_hermes({"sender": BOB, "type": "m.room.encrypted", "content": content})

        held = sessions_by_key(state_db)
        heavy = one.curve25519_key.to_base64()
        assert held.pop(alice.curve25519) == 1
        assert held[heavy] == MAX_OLM_SESSIONS
        assert sum(held.values()) <= STRANGERS_BOUND
        assert len(olm_rows(state_db)) <= 2  # Alice's row and the strangers'

        again = Olm(store, "matrix:e2ee:H:", SECRET, HERMES, "H")  # after a restart
        await again.load()
        second = await alice.encrypt_for(me, "m.room_key", {"n": 2})  # still a pre-key one
        opened = await again.decrypt_to_device(
            {"sender": ALICE, "type": "m.room.encrypted", "content": second}
        )
        assert opened["content"] == {"n": 2}
        assert await again.has_olm(Device(BOB, "STRANGER", heavy, "x"))
