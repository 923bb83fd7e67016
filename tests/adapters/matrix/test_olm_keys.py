"""A room's session key, once hermes holds it, is replaced only by a copy from the very
device that sent it: another device of the same user (one the user lost, or one an
attacker added to their account) that offers an earlier copy of the session is refused,
and what hermes keeps in state.db still opens nothing before the index it was given."""

from __future__ import annotations

import pytest

from hermes.actors.clock import Clock
from hermes.adapters.cursors import Cursors
from hermes.adapters.matrix.olm import MissingKey
from tests.adapters.matrix.test_olm import (
    ROOM,
    Store,
    device,
    olm_message,
    room_event,
    shared,
    taken,
)
from tests.fakes.matrix import ALICE, HERMES


async def test_another_device_of_the_same_user_never_replaces_a_sessions_key(registry, tmp_path):
    others = Store()
    alice, lost = await device(others, ALICE, "A"), await device(others, ALICE, "A2")
    key = await alice.room_key(ROOM, 10**9, 100)
    early = alice.share_content(ROOM, key)  # the session from index 0, as A2 came to hold it
    before = await room_event(alice, "said before hermes was in the room")  # index 0
    async with Cursors(registry, tmp_path / "state.db", Clock()) as kept:
        hermes = await device(kept, HERMES, "H")
        assert await taken(hermes, await shared(alice, hermes), alice) == ROOM  # from index 1
        copy = await olm_message(lost, hermes, "m.room_key", early)
        assert await taken(hermes, copy, lost) is None
        await hermes.flush()
        again = await device(kept, HERMES, "H")  # what a restart reads back
        with pytest.raises(MissingKey):
            await again.decrypt_room_event(ROOM, before)
        after = await again.decrypt_room_event(ROOM, await room_event(alice, "hello", n=1))
    assert after["content"]["body"] == "hello"
