"""The fake BlueBubbles's own checks: its REST API takes only the server password, a query
returns what was stored after a date (delivered or not), a send's answer alone has its tempGuid, and
its webhook deliveries carry the token they are told to (a receiver on 127.0.0.1 here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from tests.fakes.bluebubbles import ANN, PASSWORD, FakeBlueBubbles, dm, group
from tests.fakes.local_http import LocalServer

pytestmark = pytest.mark.timeout(30)


class _Receiver(BaseHTTPRequestHandler):
    got: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.got.append({"path": self.path, **body})
        status = 200 if self.path.endswith("token=right") else 401
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()


@pytest.fixture
def bb() -> Iterator[tuple[FakeBlueBubbles, list[dict[str, Any]]]]:
    got: list[dict[str, Any]] = []
    receiver = LocalServer(type("R", (_Receiver,), {"got": got}))
    receiver.start()
    with FakeBlueBubbles() as fake:
        fake.configure(webhook_url=f"{receiver.url}/webhooks/imessage?token=right")
        yield fake, got
        assert fake.internal_errors == []
    receiver.stop()


def api(fake: FakeBlueBubbles, path: str, body: Any = None, password: str = PASSWORD):
    url = f"{fake.url}/api/v1/{path}"
    params = {"password": password}
    if body is None:
        return httpx.get(url, params=params, timeout=5)
    return httpx.post(url, params=params, json=body, timeout=5)


def test_the_password_is_checked_on_every_call(bb):
    fake, _ = bb
    assert api(fake, "ping").json()["data"] == "pong"
    refused = api(fake, "server/info", password="nope")
    assert refused.status_code == 401 and refused.json()["message"] == "Unauthorized"
    assert api(fake, "server/info").json()["data"]["private_api"] is False


def test_messages_are_delivered_with_the_token_and_queried_after_a_date(bb):
    fake, got = bb
    first = fake.message("hello")
    assert fake.wait_delivered(first)["status_code"] == 200
    quiet = fake.message("while away", user="+15550000002", deliver=False)
    forged = fake.message("forged", token="wrong")
    assert fake.wait_delivered(forged)["status_code"] == 401
    assert [g["data"]["guid"] for g in got] == [first, forged] and got[0]["type"] == "new-message"
    assert got[0]["data"]["handle"]["address"] == ANN and got[0]["data"]["chats"][0]["guid"] == dm(
        ANN
    )
    after = got[0]["data"]["dateCreated"]
    body = {"after": after, "sort": "ASC", "limit": 1, "offset": 0, "with": ["chat"]}
    assert [m["guid"] for m in api(fake, "message/query", body).json()["data"]] == [quiet]
    body["offset"] = 1
    assert api(fake, "message/query", body).json()["data"] == []  # the forger's is not stored


def test_only_a_sends_answer_has_its_temp_guid_and_a_lost_answer_still_sent_it(bb):
    fake, got = bb
    send = {
        "chatGuid": group("chat1"),
        "tempGuid": "t-1",
        "message": "hi",
        "method": "apple-script",
    }
    data = api(fake, "message/text", send).json()["data"]
    assert data["tempGuid"] == "t-1" and data["isFromMe"]
    fake.lose_answer()
    with pytest.raises(httpx.RemoteProtocolError):
        api(fake, "message/text", {**send, "tempGuid": "t-2"})
    fake.lose_answer(sent=False)
    with pytest.raises(httpx.RemoteProtocolError):
        api(fake, "message/text", {**send, "tempGuid": "t-3"})
    mine = {"after": 0, "chatGuid": group("chat1"), "sort": "DESC", "limit": 10,
            "where": [{"statement": "message.is_from_me = :me", "args": {"me": 1}}]}  # fmt: skip
    found = api(fake, "message/query", mine).json()["data"]  # t-2's was sent, t-3's not
    assert [m["text"] for m in found] == ["hi", "hi"] and not [m for m in found if "tempGuid" in m]
    fake.wait_until(lambda f: len(f.deliveries) == 2, what="its own sends delivered back")
    assert all(g["data"]["isFromMe"] and "tempGuid" not in g["data"] for g in got)


def test_attachments_both_ways_and_typing_only_with_the_private_api(bb):
    fake, _ = bb
    guid = fake.message("see", attachment=("note.txt", "the note", "text/plain"))
    [info] = fake.messages_in(dm(ANN))[0]["attachments"]
    got = httpx.get(f"{fake.url}/api/v1/attachment/{info['guid']}/download",
                    params={"password": PASSWORD})  # fmt: skip
    assert got.content == b"the note" and fake.downloads == [info["guid"]]
    fields = {"chatGuid": dm(ANN), "tempGuid": "t-f", "name": "out.txt"}
    upload = {"attachment": ("out.txt", b"data", "text/plain")}
    sent = httpx.post(f"{fake.url}/api/v1/message/attachment", params={"password": PASSWORD},
                      data=fields, files=upload)  # fmt: skip
    assert sent.json()["data"]["attachments"][0]["totalBytes"] == 4
    assert fake.uploads[0]["content"] == b"data" and guid
    typing = f"chat/{dm(ANN).replace(';', '%3B').replace('+', '%2B')}/typing"
    assert api(fake, typing, {}).status_code == 500
    fake.private_api(True)
    assert api(fake, typing, {}).status_code == 200 and fake.typing == [dm(ANN)]
