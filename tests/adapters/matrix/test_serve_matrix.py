"""Matrix end to end: `hermes serve` as a process on the fake homeserver, Alice on a
client that encrypts as Element does, the fake model."""

from __future__ import annotations

import pytest

from tests.adapters.serving import in_thread
from tests.fakes.matrix import ALICE, HERMES
from tests.fakes.openai import text_answer


async def started(serve, hs, before: int = 0) -> None:
    """serve up, and its first sync answered (what is said later is new to it)."""
    await in_thread(serve.start)
    await in_thread(lambda: hs.wait_syncs(before + 2, 30.0, user=HERMES))


@pytest.mark.timeout(90)
async def test_a_dm_in_an_encrypted_room_is_answered_and_alice_reads_it(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    model.script(text_answer("Hello **Alice**."))
    await started(serve, hs)
    alice.send_text(room, "hello hermes")
    [answer] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    serve.stop()
    assert answer.encrypted and answer.content["body"] == "Hello **Alice**."
    assert answer.content["formatted_body"] == "<p>Hello <strong>Alice</strong>.</p>\n"
    [sent] = [s for s in hs.sent if s["sender"] == HERMES]
    assert sent["type"] == "m.room.encrypted" and "Alice" not in str(sent["content"])
    asked = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in asked] == ["hello hermes"]
