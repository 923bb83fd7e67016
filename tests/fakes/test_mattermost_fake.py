"""Self-tests of the fake Mattermost (tests/fakes/mattermost.py) against API v4 as its
reference documents it, driven from trio with httpx and trio-websocket as a client
would. The fake's blocking waits run in a worker thread; nothing sleeps."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from unittest.mock import ANY

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.fakes.mattermost import BOT_ID, BOT_NAME, BOT_TOKEN, SESSION_EXPIRED, FakeMattermost

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def mm() -> Iterator[FakeMattermost]:
    with FakeMattermost() as fake:
        yield fake
        assert fake.internal_errors == []


def api(fake: FakeMattermost, method: str, path: str, token: str = BOT_TOKEN,
        **kwargs: Any) -> httpx.Response:  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.request(method, f"{fake.url}/api/v4/{path}", headers=headers, timeout=5,
                         **kwargs)  # fmt: skip


async def event(ws: WebSocketConnection) -> dict[str, Any]:
    with trio.fail_after(5):
        return json.loads(await ws.get_message())


async def authenticated(ws: WebSocketConnection, token: str = BOT_TOKEN) -> dict[str, Any]:
    """The challenge's reply; then the `hello` (seq 0) when it was OK."""
    challenge = {"seq": 1, "action": "authentication_challenge", "data": {"token": token}}
    await ws.send_message(json.dumps(challenge))
    reply = await event(ws)
    if reply["status"] == "OK":
        assert (await event(ws))["event"] == "hello"
    return reply


def socket(fake: FakeMattermost) -> str:
    return fake.url.replace("http", "ws", 1) + "/api/v4/websocket"


def test_the_token_is_a_bearer_and_errors_say_their_id(mm):
    assert api(mm, "GET", "users/me").json() == {"id": BOT_ID, "username": BOT_NAME,
                                                "is_bot": True}  # fmt: skip
    refused = api(mm, "GET", "users/me", token="nope")
    assert refused.status_code == 401
    assert refused.json() == {"id": SESSION_EXPIRED, "message": ANY, "status_code": 401}
    mm.fail("create", 429, reset=7)
    limited = api(mm, "POST", "posts", json={"channel_id": "town-square", "message": "x"})
    assert limited.status_code == 429 and limited.headers["X-Ratelimit-Reset"] == "7"
    assert limited.headers["X-Ratelimit-Remaining"] == "0"
    mm.revoke_token()
    assert api(mm, "GET", "users/me").status_code == 401


async def test_the_socket_authenticates_then_numbers_its_events(mm):
    async with open_websocket_url(socket(mm)) as ws:
        assert (await authenticated(ws, "nope"))["status"] == "FAIL"
        with pytest.raises(ConnectionClosed):
            await event(ws)
    async with open_websocket_url(socket(mm)) as ws:
        assert await authenticated(ws) == {"status": "OK", "seq_reply": 1}
        first = mm.message("hello", user="ann")
        posted = await event(ws)
        assert (posted["event"], posted["seq"], posted["data"]["channel_type"]) == (
            "posted",
            1,
            "D",
        )
        assert json.loads(posted["data"]["post"])["id"] == first  # the post as a JSON string
        mm.message("gone", user="ann", lost=True)  # its seq is spent, unsent
        mm.message("hey", user="bob", channel="town-square", kind="O", mention=True)
        mentioned = await event(ws)
        assert mentioned["seq"] == 3 and json.loads(mentioned["data"]["mentions"]) == [BOT_ID]
        await ws.send_message(json.dumps({"seq": 2, "action": "ping"}))
        assert await event(ws) == {"status": "OK", "seq_reply": 2, "data": {"text": "pong"}}
        assert mm.drop() == 1
        with pytest.raises(ConnectionClosed):
            await event(ws)


def test_the_catch_up_lists_channels_and_posts_modified_since(mm):
    older = mm.message("older", user="ann")
    since = mm.created_at(older)
    newer = mm.message("newer", user="ann")
    [team] = api(mm, "GET", "users/me/teams").json()
    channels = {c["id"]: c for c in api(mm, "GET", f"users/me/teams/{team['id']}/channels").json()}
    assert channels["dm-ann"]["type"] == "D" and channels["dm-ann"]["last_post_at"] > since
    page = api(mm, "GET", "channels/dm-ann/posts", params={"since": since}).json()
    assert page["order"] == [newer] and set(page["posts"]) == {newer}  # modified after it
    assert mm.catchups[0]["since"] == since


def test_posts_patches_and_files(mm):
    theirs = mm.message("mine", user="ann")  # the DM is there once ann spoke
    file = api(mm, "POST", "files", data={"channel_id": "dm-ann"},
               files={"files": ("a.txt", b"data", "text/plain")})  # fmt: skip
    [info] = file.json()["file_infos"]
    posted = api(mm, "POST", "posts", json={"channel_id": "dm-ann", "message": "see",
                                            "file_ids": [info["id"]]})  # fmt: skip
    assert posted.status_code == 201 and posted.json()["user_id"] == BOT_ID
    patched = api(mm, "PUT", f"posts/{posted.json()['id']}/patch", json={"message": "seen"})
    assert patched.json()["message"] == "seen" and patched.json()["edit_at"] > 0
    assert api(mm, "GET", f"files/{info['id']}").content == b"data"
    gone = api(mm, "PUT", "posts/nothing/patch", json={"message": "x"})
    assert (gone.status_code, gone.json()["id"]) == (404, "app.post.get.app_error")
    assert api(mm, "PUT", f"posts/{theirs}/patch", json={"message": "x"}).status_code == 403
    too_long = {"channel_id": "dm-ann", "message": "x" * 16384}
    assert api(mm, "POST", "posts", json=too_long).status_code == 400
    assert [e["message"] for e in mm.edits] == ["seen"] and len(mm.sent) == 1


def test_the_fake_runs_in_its_own_process():
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.mattermost"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        said = httpx.post(f"{url}/_fake/message", json={"text": "hi"}, timeout=5).json()
        assert said["ok"] is True
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert state["sent"] == [] and state["open_sockets"] == 0
    finally:
        proc.kill()
        proc.wait(10)
