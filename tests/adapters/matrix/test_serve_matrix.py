"""Matrix end to end: `hermes serve` as a process on the fake homeserver, Alice (and Bob)
on a client that encrypts as Element does, the fake model."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from hermes.adapters.matrix.encryption import COULD_NOT_READ
from tests.adapters.matrix.serving import MatrixServe
from tests.adapters.relay import HeldRelay
from tests.adapters.serving import in_thread, serving
from tests.fakes.matrix import ALICE, BOB, BOB_DEVICE, BOB_TOKEN, HERMES, FakeMatrix
from tests.fakes.matrix_client import ElementClient
from tests.fakes.openai import text_answer


async def started(serve, hs: FakeMatrix, before: int = 0) -> None:
    """serve up, and its first sync answered (`before`: hermes's syncs of earlier starts):
    what is said later is new to it."""
    await in_thread(serve.start)
    await in_thread(functools.partial(hs.wait_syncs, before + 2, 30.0, user=HERMES))


def user_words(model) -> list[str]:
    """What the user said in the conversation of the model's last request."""
    return [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]


def from_hermes(hs: FakeMatrix) -> list[dict]:
    return [s for s in hs.sent if s["sender"] == HERMES]


@pytest.mark.timeout(90)
async def test_a_dm_in_an_encrypted_room_is_answered_and_alice_reads_it(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    model.script(text_answer("Hello **Alice**."))
    await started(serve, hs)
    await in_thread(alice.send_text, room, "hello hermes")
    [answer] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    serve.stop()
    assert answer.encrypted and answer.content["body"] == "Hello **Alice**."
    assert answer.content["formatted_body"] == "<p>Hello <strong>Alice</strong>.</p>\n"
    [sent] = from_hermes(hs)
    assert sent["type"] == "m.room.encrypted" and "Alice" not in str(sent["content"])
    assert user_words(model) == ["hello hermes"]


@pytest.mark.timeout(90)
async def test_typing_shows_while_a_turn_runs(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True)
    model.delay = 1.0  # the model thinks: the indicator goes up meanwhile
    model.script(text_answer("thought it over"))
    await started(serve, hs)
    await in_thread(alice.send_text, room, "think about it")
    await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    serve.stop()
    [typed, *_] = [t for t in hs.typing if t["room"] == room and t["user"] == HERMES]
    assert typed["typing"] is True and typed["timeout"] == 10_000
    assert typed["at"] < from_hermes(hs)[0]["at"]


@pytest.mark.timeout(90)
async def test_in_a_group_a_mention_is_answered_and_chatter_is_not(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES, BOB], name="Team")
    model.script(text_answer("It is noon."))
    await started(serve, hs)
    hs.message(room, BOB, "lunch anyone?")
    await in_thread(alice.send_text, room, "not now, Bob")
    await in_thread(functools.partial(alice.send_text, room, "hermes, what time is it?",
                                      mentions=[HERMES]))  # fmt: skip
    [answer] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    serve.stop()
    assert answer.content["body"] == "It is noon." and len(model.requests) == 1
    assert user_words(model) == ["hermes, what time is it?"]


@pytest.mark.timeout(90)
async def test_a_thread_reply_continues_the_threads_session(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    model.script(text_answer("About A."), text_answer("More on A."), text_answer("Still A."))
    await started(serve, hs)
    root = await in_thread(alice.send_text, room, "topic A")
    await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    await in_thread(functools.partial(alice.send_text, room, "first in the thread",
                                      thread_id=root))  # fmt: skip
    await in_thread(lambda: alice.wait_messages(room, 2, sender=HERMES))
    await in_thread(functools.partial(alice.send_text, room, "second in the thread",
                                      thread_id=root))  # fmt: skip
    answers = await in_thread(lambda: alice.wait_messages(room, 3, sender=HERMES))
    serve.stop()
    for answer in answers[1:]:  # in the thread
        relation = answer.content["m.relates_to"]
        assert (relation["rel_type"], relation["event_id"]) == ("m.thread", root)
    assert user_words(model) == ["first in the thread", "second in the thread"]


@pytest.mark.timeout(120)
async def test_serve_killed_in_a_batchs_turns_answers_every_event_once(serve, model, hs, alice):
    rooms = [hs.create_room([ALICE, HERMES], direct=True, encrypted=True) for _ in range(3)]
    await started(serve, hs)
    serve.stop()  # where hermes reads on from is kept
    for n, room in enumerate(rooms):  # one batch when serve comes back, a turn each
        await in_thread(alice.send_text, room, f"question {n}")
    model.delay = 30.0
    await started(serve, hs, before=2)
    await in_thread(model.wait_requests, 3)
    serve.kill()  # the batch admitted, its turns in flight
    model.delay = 0.0
    model.script(*(text_answer("answer") for _ in rooms))
    await started(serve, hs, before=hs_syncs(hs))
    for room in rooms:
        wait = functools.partial(alice.wait_messages, room, 1, sender=HERMES)
        [answer] = await in_thread(wait)
        assert answer.content["body"] == "(answered after hermes restarted) answer"
    serve.stop()
    assert [state for *_, state in serve.journal()] == ["answered"] * 3
    assert len(from_hermes(hs)) == 3 and len(model.requests) == 6


def hs_syncs(hs: FakeMatrix) -> int:
    return sum(1 for s in hs.syncs if s["user"] == HERMES)


@pytest.fixture
def relay(hs) -> Iterator[HeldRelay]:
    with HeldRelay(hs.url) as held:
        yield held


@pytest.mark.timeout(120)
async def test_an_unknown_send_is_sent_again_with_its_txn_id_and_shows_once(
    home, model, hs, alice, relay
):
    room = hs.create_room([ALICE, HERMES], direct=True)
    with serving(MatrixServe, relay, home, model) as serve:
        model.script(text_answer("only once"))
        await started(serve, hs)
        relay.hold(b"/send/m.room.message/")
        await in_thread(alice.send_text, room, "hello")
        await in_thread(relay.wait_held, 1)
        serve.kill()  # the send in flight: its outcome unknown
        relay.release()  # the homeserver takes it; nobody reads its answer
        await in_thread(functools.partial(hs.wait_sent, 2, 30.0))
        await started(serve, hs, before=hs_syncs(hs))
        await serve.until_outbox("sent")
        serve.stop()
    puts = [r["path"] for r in hs.requests if r["endpoint"] == "send" and r["user"] == HERMES]
    assert len(puts) == 2 and puts[0] == puts[1]  # sent again, under the same transaction
    [answer] = from_hermes(hs)
    assert answer["content"]["body"] == "only once"


@pytest.mark.timeout(120)
async def test_a_new_member_reads_the_bots_next_message_and_not_earlier_ones(
    serve, model, hs, alice
):
    room = hs.create_room([ALICE, HERMES], name="Plans", encrypted=True)
    model.script(text_answer("before Bob"), text_answer("after Bob"))
    await started(serve, hs)
    await in_thread(functools.partial(alice.send_text, room, "hermes: one", mentions=[HERMES]))
    await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    hs.invite(room, BOB, ALICE)
    hs.join(room, BOB)
    with ElementClient(hs.url, BOB, BOB_TOKEN, BOB_DEVICE) as bob:
        await in_thread(bob.start)
        await in_thread(functools.partial(alice.send_text, room, "hermes: two",
                                          mentions=[HERMES]))  # fmt: skip
        [later] = await in_thread(lambda: bob.wait_messages(room, 1, sender=HERMES))
        await in_thread(functools.partial(bob.wait_messages, room, 2))  # Alice's, too
        unread = [e["event_id"] for e in bob.undecrypted]
    serve.stop()
    assert later.content["body"] == "after Bob"
    [before, after] = from_hermes(hs)
    assert before["event_id"] in unread and after["event_id"] not in unread
    assert before["content"]["session_id"] != after["content"]["session_id"]  # rotated


@pytest.mark.timeout(120)
async def test_a_message_whose_key_comes_late_is_answered_when_it_comes(serve, model, hs, alice):
    serve.configure(platform="    key_wait: 1\n")
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    model.script(text_answer("now I can read it"))
    await started(serve, hs)
    await in_thread(functools.partial(alice.send_text, room, "the key comes later",
                                      share_key=False))  # fmt: skip
    [notice] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    assert notice.content["body"] == COULD_NOT_READ and notice.content["msgtype"] == "m.notice"
    while not alice.key_requests:  # each sync waits for news (pytest-timeout guards)
        await in_thread(functools.partial(alice.sync, 2000))
    [request] = alice.key_requests
    assert request["action"] == "request" and request["body"]["room_id"] == room
    assert not model.requests  # nothing it could not read reached the model
    await in_thread(alice.share_room_key, room)
    [_, answer] = await in_thread(lambda: alice.wait_messages(room, 2, sender=HERMES))
    serve.stop()
    assert answer.content["body"] == "now I can read it"
    assert user_words(model) == ["the key comes later"]


@pytest.mark.timeout(120)
async def test_the_crypto_state_survives_a_restart(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    model.script(text_answer("first"), text_answer("second"))
    await started(serve, hs)
    await in_thread(alice.send_text, room, "one")
    await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    keys = hermes_keys(hs)
    serve.stop()
    await started(serve, hs, before=hs_syncs(hs))
    await in_thread(alice.send_text, room, "two")  # under the session hermes had before
    await in_thread(lambda: alice.wait_messages(room, 2, sender=HERMES))
    serve.stop()
    assert hermes_keys(hs) == keys  # the same device, no new keys to trust
    first, second = from_hermes(hs)
    assert first["content"]["session_id"] == second["content"]["session_id"]
    assert user_words(model) == ["one", "two"]
    claims = [c for c in hs.claims if c["user"] == HERMES]
    assert len(claims) == 1  # Alice's Olm session with hermes went on across the restart


def hermes_keys(hs: FakeMatrix) -> list[dict]:
    return [d["keys"] for d in hs.devices if d["user_id"] == HERMES]
