"""The addresses and transaction ids hermes sends to a Matrix homeserver with (what its
answers mean: tests/adapters/test_refusals.py)."""

from __future__ import annotations

from hermes.adapters.matrix.api import client_url, txn_id


def test_room_ids_and_transaction_ids_are_safe_in_a_path_and_stable():
    url = client_url("https://hs.example/", "rooms", "!abc:hs.example", "send",
                     "m.room.message", txn_id("reply:7:0"))  # fmt: skip
    assert url.startswith("https://hs.example/_matrix/client/v3/rooms/%21abc%3Ahs.example/")
    assert url.endswith("/send/m.room.message/" + txn_id("reply:7:0"))
    assert txn_id("reply:7:0") == txn_id("reply:7:0") != txn_id("reply:7:1")


def test_each_state_of_an_edit_has_its_own_transaction_id():
    """Under the row's own id the homeserver would answer an edit with the first send's
    event and show nothing; the same state sent again keeps its id."""
    first = txn_id("reply:7:0")
    assert txn_id("reply:7:0", "w0 w1") not in (first, txn_id("reply:7:0", "w0 w1 w2"))
    assert txn_id("reply:7:0", "w0 w1") == txn_id("reply:7:0", "w0 w1")
