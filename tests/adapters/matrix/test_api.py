"""What a Matrix homeserver's answer to a send means for its outbox row, and the
addresses and transaction ids hermes sends with."""

from __future__ import annotations

import httpx
import pytest

from hermes.adapters.contract import Permanent, RetryAfter, Sent
from hermes.adapters.http import HttpAnswer
from hermes.adapters.matrix.api import client_url, send_result, txn_id


def answer(status: int, body: object, **headers: str) -> HttpAnswer:
    return HttpAnswer(status, body, httpx.Headers(headers))


@pytest.mark.parametrize(
    ("got", "means"),
    [
        (answer(200, {"event_id": "$e1"}), Sent("$e1")),
        (answer(429, {"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 2500}),
         RetryAfter(2.5, "send: 429 M_LIMIT_EXCEEDED")),
        (answer(429, {"errcode": "M_LIMIT_EXCEEDED"}, **{"Retry-After": "3"}),
         RetryAfter(3.0, "send: 429 M_LIMIT_EXCEEDED")),
        (answer(502, None), RetryAfter(None, "send: 502 M_UNKNOWN")),
        (answer(401, {"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid token"}),
         RetryAfter(None, "send: 401 M_UNKNOWN_TOKEN (Invalid token)")),
        (answer(403, {"errcode": "M_FORBIDDEN", "error": "not in room"}),
         Permanent("send: 403 M_FORBIDDEN (not in room)")),
        (answer(200, {"no": "event id"}), RetryAfter(None, "send: 200 M_UNKNOWN")),
    ],
)  # fmt: skip
def test_a_sends_answer_is_read_into_its_result(got, means):
    assert send_result(got) == means


def test_room_ids_and_transaction_ids_are_safe_in_a_path_and_stable():
    url = client_url("https://hs.example/", "rooms", "!abc:hs.example", "send",
                     "m.room.message", txn_id("reply:7:0"))  # fmt: skip
    assert url.startswith("https://hs.example/_matrix/client/v3/rooms/%21abc%3Ahs.example/")
    assert url.endswith("/send/m.room.message/" + txn_id("reply:7:0"))
    assert txn_id("reply:7:0") == txn_id("reply:7:0") != txn_id("reply:7:1")
