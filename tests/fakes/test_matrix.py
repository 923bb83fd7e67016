"""Self-tests of the fake Matrix homeserver (tests/fakes/matrix.py), driven with httpx
synchronously as a client would; a held sync runs in a thread, and the test waits on the
fake's conditions, never by sleeping."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.matrix import (
    ALICE,
    ALICE_DEVICE,
    ALICE_TOKEN,
    BOB,
    BOB_TOKEN,
    HERMES,
    HERMES_DEVICE,
    HERMES_TOKEN,
    MEGOLM,
    PASSWORD,
    FakeMatrix,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def hs() -> Iterator[FakeMatrix]:
    with FakeMatrix() as fake:
        yield fake
        assert fake.internal_errors == []


def client(hs: FakeMatrix, token: str | None = HERMES_TOKEN, read: float = 10) -> httpx.Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    # plain HTTP: no certificates to load (40 ms a client)
    return httpx.Client(base_url=hs.api_url, headers=headers, verify=False,
                        timeout=httpx.Timeout(10, read=read))  # fmt: skip


def sync(hs: FakeMatrix, token: str = HERMES_TOKEN, **params: Any) -> dict[str, Any]:
    params.setdefault("timeout", 0)
    with client(hs, token) as c:
        answer = c.get("/sync", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def timeline(body: dict[str, Any], room: str) -> list[dict[str, Any]]:
    return body["rooms"]["join"][room]["timeline"]["events"]


def bodies(events: list[dict[str, Any]]) -> list[str]:
    return [e["content"]["body"] for e in events if e["type"] == "m.room.message"]


class Sync(threading.Thread):
    """A /sync in its own thread; `result()` once it answered."""

    def __init__(self, hs: FakeMatrix, **params: Any) -> None:
        super().__init__(daemon=True)
        self.hs, self.params = hs, params
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with client(self.hs) as c:
                self.response = c.get("/sync", params=self.params)
        except BaseException as exc:  # noqa: BLE001 - reported by result()
            self.error = exc

    def result(self) -> dict[str, Any]:
        self.join(10)
        assert not self.is_alive(), "the sync never answered"
        if self.error is not None:
            raise self.error
        assert self.response is not None and self.response.status_code == 200
        return self.response.json()


def test_whoami_login_and_wrong_tokens(hs: FakeMatrix):
    with client(hs) as c:
        assert c.get("/account/whoami").json() == {
            "user_id": HERMES, "device_id": HERMES_DEVICE, "is_guest": False,
        }  # fmt: skip
    with client(hs, "nope") as c:
        for answer in (c.get("/account/whoami"), c.get("/sync"),
                       c.put("/rooms/!x:test.local/send/m.room.message/1", json={})):  # fmt: skip
            assert answer.status_code == 401
            assert answer.json()["errcode"] == "M_UNKNOWN_TOKEN"
    with client(hs, None) as c:
        assert c.get("/account/whoami").json()["errcode"] == "M_MISSING_TOKEN"
        wrong = c.post(
            "/login",
            json={
                "type": "m.login.password",
                "password": "x",
                "identifier": {"type": "m.id.user", "user": "hermes"},
            },
        )
        assert (wrong.status_code, wrong.json()["errcode"]) == (403, "M_FORBIDDEN")
        login = c.post(
            "/login",
            json={
                "type": "m.login.password",
                "password": PASSWORD,
                "identifier": {"type": "m.id.user", "user": "hermes"},
            },
        )
    assert login.status_code == 200
    session = login.json()
    assert session["user_id"] == HERMES and session["device_id"] != HERMES_DEVICE
    with client(hs, session["access_token"]) as c:
        assert c.get("/account/whoami").json()["device_id"] == session["device_id"]
        hs.revoke_token(session["access_token"])
        assert c.get("/account/whoami").json()["errcode"] == "M_UNKNOWN_TOKEN"
    assert [r["status"] for r in hs.requests][:2] == [200, 401]
    assert hs.requests[0]["user"] == HERMES and hs.requests[1]["user"] is None


def test_an_invite_a_join_and_a_message_through_sync(hs: FakeMatrix):
    first = sync(hs)
    assert first["rooms"]["join"] == {} and first["rooms"]["invite"] == {}
    room = hs.create_room([ALICE], name="Chat", direct=True, invite=[HERMES])
    invited = sync(hs, since=first["next_batch"])
    stripped = invited["rooms"]["invite"][room]["invite_state"]["events"]
    me = [e for e in stripped if e["type"] == "m.room.member" and e["state_key"] == HERMES]
    assert me == [{"type": "m.room.member", "state_key": HERMES, "sender": ALICE,
                   "content": {"membership": "invite", "displayname": "hermes",
                               "is_direct": True}}]  # fmt: skip
    assert {"type": "m.room.name", "state_key": "", "sender": ALICE,
            "content": {"name": "Chat"}} in stripped  # fmt: skip
    assert hs.account_data(ALICE, "m.direct") == {HERMES: [room]}
    with client(hs) as c:
        assert c.post(f"/rooms/{room}/join", json={}).json() == {"room_id": room}
        assert c.put(f"/user/{HERMES}/account_data/m.direct", json={ALICE: [room]}).json() == {}
        assert c.get(f"/rooms/{room}/joined_members").json() == {
            "joined": {ALICE: {"display_name": "alice"}, HERMES: {"display_name": "hermes"}}
        }
    hello = hs.message(room, ALICE, "hello hermes", mentions=[HERMES])
    assert hello["event_id"].startswith("$") and hello["origin_server_ts"] > 0
    joined = sync(hs, since=invited["next_batch"])
    entry = joined["rooms"]["join"][room]
    events = entry["timeline"]["events"]
    assert [(e["type"], e.get("state_key")) for e in events][-2:] == [
        ("m.room.member", HERMES), ("m.room.message", None)]  # fmt: skip
    assert events[-1]["event_id"] == hello["event_id"]
    assert events[-1]["content"]["m.mentions"] == {"user_ids": [HERMES]}
    # the whole room fits in a newly joined room's timeline: no state before it
    assert events[0]["type"] == "m.room.create" and entry["state"]["events"] == []
    assert entry["timeline"]["limited"] is False
    assert joined["account_data"]["events"] == [{"type": "m.direct", "content": {ALICE: [room]}}]
    assert joined["rooms"]["invite"] == {}
    quiet = sync(hs, since=joined["next_batch"])
    assert quiet["rooms"]["join"] == {} and quiet["next_batch"] == joined["next_batch"]


def test_a_long_poll_is_woken_by_a_message(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES])
    since = sync(hs)["next_batch"]
    held = Sync(hs, since=since, timeout=20_000)
    hs.wait_held_syncs(1)
    assert held.is_alive()
    sent = hs.message(room, ALICE, "wake up", thread="$root")
    body = held.result()
    [event] = timeline(body, room)
    assert event["event_id"] == sent["event_id"]
    assert event["content"]["m.relates_to"] == {
        "rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$root"},
    }  # fmt: skip
    assert [s["since"] for s in hs.wait_syncs(2, user=HERMES)] == [None, since]


def test_an_old_since_replays_everything_after_it(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES])
    start = sync(hs)["next_batch"]
    hs.message(room, ALICE, "one")
    first = sync(hs, since=start, timeout=10_000)
    hs.message(room, ALICE, "two")
    second = sync(hs, since=first["next_batch"], timeout=10_000)
    assert bodies(timeline(first, room)) == ["one"] and bodies(timeline(second, room)) == ["two"]
    replay = sync(hs, since=start)  # the adapter crashed before committing `first`
    assert bodies(timeline(replay, room)) == ["one", "two"]
    assert replay["rooms"]["join"][room]["timeline"]["limited"] is False
    assert replay["next_batch"] == second["next_batch"]


def test_a_limited_timeline_and_messages_filling_the_gap(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES])
    since = sync(hs)["next_batch"]
    for n in range(7):
        hs.message(room, ALICE, f"m{n}")
    hs.event(room, ALICE, "m.room.topic", {"topic": "gap"}, "")
    hs.message(room, ALICE, "m7")
    hs.limit_timeline(room, 2)
    body = sync(hs, since=since)
    entry = body["rooms"]["join"][room]
    assert entry["timeline"]["limited"] is True
    assert bodies(entry["timeline"]["events"]) == ["m7"]  # the topic, then m7
    assert [e["type"] for e in entry["state"]["events"]] == []  # the topic is in the timeline
    with client(hs) as c:
        page = c.get(
            f"/rooms/{room}/messages",
            params={"from": entry["timeline"]["prev_batch"], "dir": "b", "limit": 4},
        )
        assert page.status_code == 200
        first = page.json()
        assert bodies(first["chunk"]) == ["m6", "m5", "m4", "m3"] and "end" in first
        assert all(e["room_id"] == room for e in first["chunk"])
        rest = c.get(
            f"/rooms/{room}/messages", params={"from": first["end"], "dir": "b", "limit": 100}
        ).json()
    assert bodies(rest["chunk"]) == ["m2", "m1", "m0"] and "end" not in rest
    assert rest["chunk"][-1]["type"] == "m.room.create"
    hs.message(room, ALICE, "after")
    again = sync(hs, since=body["next_batch"])
    assert again["rooms"]["join"][room]["timeline"]["limited"] is False  # used once


def test_a_limited_timeline_puts_the_gaps_state_in_state(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES])
    since = sync(hs)["next_batch"]
    hs.event(room, ALICE, "m.room.name", {"name": "renamed"}, "")
    for n in range(3):
        hs.message(room, ALICE, f"m{n}")
    hs.limit_timeline(room, 1)
    entry = sync(hs, since=since)["rooms"]["join"][room]
    assert bodies(entry["timeline"]["events"]) == ["m2"]
    assert [(e["type"], e["content"]) for e in entry["state"]["events"]] == [
        ("m.room.name", {"name": "renamed"})]  # fmt: skip


def test_a_send_is_deduplicated_by_its_txn_id(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES], encrypted=True)
    alice_since = sync(hs, ALICE_TOKEN)["next_batch"]
    since = sync(hs)["next_batch"]
    with client(hs) as c:
        path = f"/rooms/{room}/send/m.room.message/txn1"
        first = c.put(path, json={"msgtype": "m.text", "body": "hi"})
        again = c.put(path, json={"msgtype": "m.text", "body": "hi"})
        other = c.put(
            f"/rooms/{room}/send/m.reaction/txn2",
            json={
                "m.relates_to": {
                    "rel_type": "m.annotation",
                    "event_id": first.json()["event_id"],
                    "key": "👍",
                }
            },
        )
    assert first.status_code == again.status_code == other.status_code == 200
    assert first.json() == again.json()
    [message, reaction] = hs.wait_sent(2)
    assert (message["room"], message["type"], message["txn_id"], message["event_id"]) == (
        room, "m.room.message", "txn1", first.json()["event_id"])  # fmt: skip
    assert message["content"] == {"msgtype": "m.text", "body": "hi"}
    assert message["encrypted_room"] is True and reaction["type"] == "m.reaction"
    mine = timeline(sync(hs, since=since), room)
    assert [e["unsigned"].get("transaction_id") for e in mine] == ["txn1", "txn2"]
    theirs = timeline(sync(hs, ALICE_TOKEN, since=alice_since), room)
    assert [e["event_id"] for e in theirs] == [e["event_id"] for e in mine]
    assert all("transaction_id" not in e["unsigned"] for e in theirs)
    assert hs.state_of(room, "m.room.encryption") == {
        "algorithm": MEGOLM,
        "rotation_period_ms": 604800000,
        "rotation_period_msgs": 100,
    }
    with client(hs, BOB_TOKEN) as c:
        outsider = c.put(f"/rooms/{room}/send/m.room.message/txn1", json={"body": "x"})
    assert (outsider.status_code, outsider.json()["errcode"]) == (403, "M_FORBIDDEN")


def test_a_429_with_retry_after_then_the_same_txn_succeeds(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES])
    hs.fail(429, retry_after_ms=1500)
    hs.fail(502, endpoint="sync")
    with client(hs) as c:
        path = f"/rooms/{room}/send/m.room.message/t1"
        limited = c.put(path, json={"msgtype": "m.text", "body": "hi"})
        ok = c.put(path, json={"msgtype": "m.text", "body": "hi"})
        broken = c.get("/sync")
    assert limited.status_code == 429
    assert limited.json() == {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
                              "retry_after_ms": 1500}  # fmt: skip
    assert limited.headers["retry-after"] == "2"
    assert ok.status_code == 200 and len(hs.sent) == 1
    assert (broken.status_code, broken.json()["errcode"]) == (502, "M_UNKNOWN")
    assert hs.rate_limited == 1
    assert [(r["endpoint"], r["status"], r["txn_id"]) for r in hs.wait_refused(2)] == [
        ("send", 429, "t1"), ("sync", 502, None)]  # fmt: skip


def test_keys_upload_query_and_claim(hs: FakeMatrix):
    room = hs.create_room([ALICE, HERMES], encrypted=True)
    since = sync(hs)["next_batch"]
    device_keys = {"user_id": ALICE, "device_id": ALICE_DEVICE,
                   "algorithms": ["m.olm.v1.curve25519-aes-sha2", MEGOLM],
                   "keys": {f"curve25519:{ALICE_DEVICE}": "c", f"ed25519:{ALICE_DEVICE}": "e"},
                   "signatures": {ALICE: {f"ed25519:{ALICE_DEVICE}": "sig"}}}  # fmt: skip
    one = {"key": "otk1", "signatures": {}}
    spare = {"key": "fb", "fallback": True, "signatures": {}}
    with client(hs, ALICE_TOKEN) as alice:
        uploaded = alice.post("/keys/upload", json={
            "device_keys": device_keys, "one_time_keys": {"signed_curve25519:AAAA": one},
            "fallback_keys": {"signed_curve25519:FFFF": spare}}).json()  # fmt: skip
        assert uploaded == {"one_time_key_counts": {"signed_curve25519": 1}}
        clash = alice.post("/keys/upload", json={"one_time_keys": {
            "signed_curve25519:AAAA": {"key": "other"}}})  # fmt: skip
        assert clash.status_code == 400
    changed = sync(hs, since=since)
    assert changed["device_lists"]["changed"] == [ALICE]
    assert room not in changed["rooms"]["join"]
    with client(hs) as c:
        query = c.post("/keys/query", json={"device_keys": {ALICE: []}}).json()
        assert query == {"device_keys": {ALICE: {ALICE_DEVICE: device_keys}}, "failures": {}}
        claim = {"one_time_keys": {ALICE: {ALICE_DEVICE: "signed_curve25519"}}}
        claimed = [c.post("/keys/claim", json=claim).json() for _ in range(3)]
    assert claimed[0]["one_time_keys"] == {
        ALICE: {ALICE_DEVICE: {"signed_curve25519:AAAA": one}}}  # fmt: skip
    assert claimed[1]["one_time_keys"] == claimed[2]["one_time_keys"] == {
        ALICE: {ALICE_DEVICE: {"signed_curve25519:FFFF": spare}}}  # fmt: skip
    assert [c["fallback"] for c in hs.claims] == [False, True, True]
    alice_view = sync(hs, ALICE_TOKEN)
    assert alice_view["device_one_time_keys_count"] == {"signed_curve25519": 0}
    assert alice_view["device_unused_fallback_key_types"] == []
    assert sync(hs, since=changed["next_batch"])["device_lists"]["changed"] == []


def test_a_to_device_message_is_delivered_once(hs: FakeMatrix):
    start = sync(hs)["next_batch"]
    with client(hs, ALICE_TOKEN) as alice:
        body = {"messages": {HERMES: {HERMES_DEVICE: {"algorithm": "m.olm", "n": 1}}}}
        for _ in range(2):  # a retry of the same transaction
            assert alice.put("/sendToDevice/m.room.encrypted/tx1", json=body).json() == {}
    [record] = hs.wait_to_device_sent(1)
    assert (record["user"], record["device_id"], record["delivered"]) == (HERMES, HERMES_DEVICE, 1)
    hs.to_device(HERMES, "*", "m.room_key_request", {"n": 2}, sender=BOB)
    first = sync(hs, since=start)
    assert first["to_device"]["events"] == [
        {"sender": ALICE, "type": "m.room.encrypted", "content": {"algorithm": "m.olm", "n": 1}},
        {"sender": BOB, "type": "m.room_key_request", "content": {"n": 2}},
    ]
    assert sync(hs, since=start)["to_device"]["events"] == first["to_device"]["events"]  # unacked
    assert sync(hs, since=first["next_batch"])["to_device"]["events"] == []  # acked: gone
    assert sync(hs, since=start)["to_device"]["events"] == []


def test_hung_syncs_get_no_answer_until_unhung(hs: FakeMatrix):
    hs.hang_syncs()
    with client(hs, read=0.3) as c:
        with pytest.raises(httpx.ReadTimeout):
            c.get("/sync", params={"timeout": 0})
    held = Sync(hs, timeout=0)
    hs.wait_held_syncs(2)
    assert held.is_alive() and len(hs.syncs) == 2
    hs.unhang_syncs()
    assert "next_batch" in held.result()


def test_a_handlers_exception_answers_500_and_is_recorded(monkeypatch: pytest.MonkeyPatch):
    with FakeMatrix() as fake:
        monkeypatch.setattr(fake, "_api_whoami", lambda call: 1 / 0)
        with client(fake) as c:
            answer = c.get("/account/whoami")
        assert (answer.status_code, answer.json()["errcode"]) == (500, "M_UNKNOWN")
        [trace] = fake.internal_errors
        assert "ZeroDivisionError" in trace


def media(hs: FakeMatrix, token: str | None = HERMES_TOKEN) -> httpx.Client:
    """A client of the homeserver's root (the media paths are not under the client API)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=hs.url, headers=headers, timeout=10)


def test_an_upload_is_recorded_and_downloaded_with_a_token(hs: FakeMatrix):
    with media(hs) as c:
        answer = c.post("/_matrix/media/v3/upload", params={"filename": "chart.txt"},
                        content=b"the chart", headers={"Content-Type": "text/plain"})  # fmt: skip
        mxc = answer.json()["content_uri"]
        [upload] = hs.wait_uploads(1)
        assert hs.downloads == []
        got = c.get(f"/_matrix/client/v1/media/download/{mxc[len('mxc://') :]}")
    assert mxc.startswith("mxc://test.local/") and upload["mxc"] == mxc
    assert (upload["user"], upload["filename"], upload["content_type"]) == (
        HERMES, "chart.txt", "text/plain")  # fmt: skip
    assert (upload["size"], upload["content"]) == (9, b"the chart")
    assert upload["sha256"] == hashlib.sha256(b"the chart").hexdigest()
    assert (got.status_code, got.content, got.headers["content-type"]) == (
        200, b"the chart", "text/plain")  # fmt: skip
    [download] = hs.wait_downloads(1)
    assert (download["mxc"], download["user"], download["authenticated"]) == (mxc, HERMES, True)


def test_media_a_test_adds_is_served_and_unknown_media_is_not(hs: FakeMatrix):
    mxc = hs.add_media(b"\x89PNG...", "image/png", "cat.png")
    where = mxc[len("mxc://") :]
    with media(hs) as c:
        named = c.get(f"/_matrix/client/v1/media/download/{where}/cat.png")
        unknown = c.get("/_matrix/client/v1/media/download/test.local/nothing")
        legacy = c.get(f"/_matrix/media/v3/download/{where}")  # new media: authenticated only
    with media(hs, token=None) as anonymous:
        refused = anonymous.get(f"/_matrix/client/v1/media/download/{where}")
    assert (named.status_code, named.content) == (200, b"\x89PNG...")
    assert (unknown.status_code, unknown.json()["errcode"]) == (404, "M_NOT_FOUND")
    assert (legacy.status_code, legacy.json()["errcode"]) == (404, "M_NOT_FOUND")
    assert (refused.status_code, refused.json()["errcode"]) == (401, "M_MISSING_TOKEN")
    assert len(hs.downloads) == 1 and hs.uploads == []  # add_media is no client's upload
    assert hs.media_content(mxc) == b"\x89PNG..."


def test_an_upload_over_max_upload_is_m_too_large(hs: FakeMatrix):
    hs.max_upload = 8
    with media(hs) as c:
        config = c.get("/_matrix/client/v1/media/config").json()
        big = c.post("/_matrix/media/v3/upload", content=b"123456789")
        fits = c.post("/_matrix/media/v3/upload", content=b"12345678")
    assert config == {"m.upload.size": 8}
    assert (big.status_code, big.json()["errcode"]) == (413, "M_TOO_LARGE")
    assert fits.status_code == 200
    [upload] = hs.uploads
    assert (upload["size"], upload["content_type"]) == (8, "application/octet-stream")


def test_an_older_homeserver_serves_media_without_authentication(hs: FakeMatrix):
    hs.authenticated_media = False
    mxc = hs.add_media(b"old", "text/plain", "old.txt")
    where = mxc[len("mxc://") :]
    with media(hs, token=None) as c:
        legacy = c.get(f"/_matrix/media/v3/download/{where}")
    with media(hs) as c:
        new = c.get(f"/_matrix/client/v1/media/download/{where}")
    assert (legacy.status_code, legacy.content) == (200, b"old")
    assert (new.status_code, new.json()["errcode"]) == (404, "M_UNRECOGNIZED")
    [download] = hs.downloads
    assert (download["user"], download["authenticated"]) == (None, False)
