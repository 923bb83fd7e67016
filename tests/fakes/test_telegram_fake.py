"""Self-tests of the fake Telegram Bot API (tests/fakes/telegram.py), driven with
httpx synchronously; a held poll runs in a thread, and the test waits on the
fake's conditions, never by sleeping."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.telegram import BOT_ID, BOT_USERNAME, FakeTelegram

TOKEN = "123:abc"


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake
        assert fake.internal_errors == []


def call(tg: FakeTelegram, method: str, **params: Any) -> httpx.Response:
    return httpx.post(f"{tg.api_url}/{method}", json=params, timeout=10)


class Poll(threading.Thread):
    """A getUpdates call in its own thread; `response` once it answered."""

    def __init__(self, tg: FakeTelegram, **params: Any) -> None:
        super().__init__(daemon=True)
        self.tg, self.params = tg, params
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.response = call(self.tg, "getUpdates", **self.params)
        except BaseException as exc:  # noqa: BLE001 - reported by result()
            self.error = exc

    def result(self) -> httpx.Response:
        self.join(10)
        assert not self.is_alive(), "the poll never answered"
        if self.error is not None:
            raise self.error
        assert self.response is not None
        return self.response


@pytest.mark.timeout(30)
def test_get_me_and_a_wrong_token(tg: FakeTelegram):
    me = httpx.get(f"{tg.api_url}/getMe", timeout=5).json()
    assert me["ok"] is True
    assert me["result"] | {"id": BOT_ID, "is_bot": True, "username": BOT_USERNAME} == me["result"]
    assert me["result"]["first_name"] == "Hermes"
    wrong = httpx.get(f"{tg.url}/botnope/getMe", timeout=5)
    assert wrong.status_code == 401
    assert wrong.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}


@pytest.mark.timeout(30)
def test_a_long_poll_holds_then_returns_an_injected_update(tg: FakeTelegram):
    poll = Poll(tg, offset=0, timeout=20)
    tg.wait_held_polls(1)
    assert poll.is_alive()
    update_id = tg.message("hi @hermes_test_bot", chat_type="group", chat_id=-5)
    body = poll.result().json()
    assert body["ok"] is True
    [update] = body["result"]
    assert update["update_id"] == update_id
    message = update["message"]
    assert message["chat"] == {"id": -5, "type": "group", "title": "Test group"}
    assert message["text"] == "hi @hermes_test_bot"
    assert message["entities"] == [{"type": "mention", "offset": 3, "length": 16}]
    assert tg.max_concurrent_polls == 1


@pytest.mark.timeout(30)
def test_a_poll_times_out_empty(tg: FakeTelegram):
    answer = call(tg, "getUpdates", timeout=0)
    assert answer.json() == {"ok": True, "result": []}


@pytest.mark.timeout(30)
def test_mention_offsets_count_utf16_units(tg: FakeTelegram):
    tg.message("😀 @hermes_test_bot")
    [update] = call(tg, "getUpdates").json()["result"]
    assert update["message"]["entities"] == [{"type": "mention", "offset": 3, "length": 16}]


@pytest.mark.timeout(30)
def test_an_offset_confirms_the_updates_below_it(tg: FakeTelegram):
    first = tg.message("one")
    second = tg.message("two")
    ids = [u["update_id"] for u in call(tg, "getUpdates", timeout=0).json()["result"]]
    assert ids == [first, second]
    assert tg.pending == [first, second]  # delivered is not confirmed
    again = call(tg, "getUpdates", offset=second, timeout=0).json()["result"]
    assert [u["update_id"] for u in again] == [second]
    tg.wait_acked(first)
    assert tg.acked == first and tg.pending == [second]
    assert call(tg, "getUpdates", offset=second + 1, timeout=0).json()["result"] == []
    assert tg.acked == second and tg.pending == []


@pytest.mark.timeout(30)
def test_a_second_concurrent_poller_gets_409(tg: FakeTelegram):
    first = Poll(tg, timeout=20)
    tg.wait_held_polls(1)
    second = call(tg, "getUpdates", timeout=20)
    assert second.status_code == 409
    assert second.json()["description"].startswith("Conflict: terminated by other getUpdates")
    assert tg.conflicts == 1 and tg.max_concurrent_polls == 2
    update_id = tg.message("still served")
    assert first.result().json()["result"][0]["update_id"] == update_id


@pytest.mark.timeout(30)
def test_a_poll_whose_client_left_does_not_conflict(tg: FakeTelegram):
    with httpx.Client(timeout=httpx.Timeout(10, read=0.3)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(f"{tg.api_url}/getUpdates", json={"timeout": 20})
    answer = call(tg, "getUpdates", timeout=0)
    assert answer.status_code == 200
    assert tg.conflicts == 0 and tg.max_concurrent_polls == 1


@pytest.mark.timeout(30)
def test_text_length_counts_utf16_units(tg: FakeTelegram):
    too_long = call(tg, "sendMessage", chat_id=7, text="😀" * 2049)  # 4098 units
    assert too_long.status_code == 400
    assert too_long.json()["description"] == "Bad Request: message is too long"
    taken = call(tg, "sendMessage", chat_id=7, text="a" * 4096)
    assert taken.status_code == 200
    assert call(tg, "sendMessage", chat_id=7, text="😀" * 2048).status_code == 200
    empty = call(tg, "sendMessage", chat_id=7, text="")
    assert empty.json()["description"] == "Bad Request: message text is empty"
    assert [len(s["text"]) for s in tg.wait_sent(2)] == [4096, 2048]
    assert len(tg.wait_refused(2)) == 2


@pytest.mark.timeout(30)
def test_markdown_v2_is_checked(tg: FakeTelegram):
    refused = call(tg, "sendMessage", chat_id=7, text="Done.", parse_mode="MarkdownV2")
    assert refused.status_code == 400
    assert refused.json()["description"].startswith("Bad Request: can't parse entities: ")
    for bad in ("a-b", "Hi!", "*open", "_x", "(x)"):
        answer = call(tg, "sendMessage", chat_id=7, text=bad, parse_mode="MarkdownV2")
        assert answer.status_code == 400, bad
    good = [
        "Done\\.",
        "*bold* and _italic_ and __under__ and ~gone~ and ||hidden||",
        "run `rm -rf /tmp/x.y` now",
        "```python\nprint('a.b-c!')\n```",
        "[a link](https://example.com/a_b)",
        "> quoted\\.",
        "`a \\` tick`",
    ]
    for text in good:
        answer = call(tg, "sendMessage", chat_id=7, text=text, parse_mode="MarkdownV2")
        assert answer.status_code == 200, (text, answer.json())
    sent = tg.wait_sent(len(good))
    assert sent[0]["text"] == "Done\\." and sent[0]["parse_mode"] == "MarkdownV2"
    assert call(tg, "sendMessage", chat_id=7, text="Done.").status_code == 200  # plain
    assert len(tg.refused) == 6


@pytest.mark.timeout(30)
def test_a_429_fault_carries_retry_after(tg: FakeTelegram):
    tg.fail("sendMessage", 429, retry_after=5)
    answer = call(tg, "sendMessage", chat_id=7, text="hello")
    assert answer.status_code == 429
    assert answer.json() == {
        "ok": False, "error_code": 429, "description": "Too Many Requests: retry after 5",
        "parameters": {"retry_after": 5},
    }  # fmt: skip
    assert tg.wait_refused(1)[0]["text"] == "hello"
    assert call(tg, "sendMessage", chat_id=7, text="hello").status_code == 200


@pytest.mark.timeout(30)
def test_faults_filter_by_chat_and_count(tg: FakeTelegram):
    tg.fail("sendMessage", 403, chat_id=8, times=2)
    assert call(tg, "sendMessage", chat_id=7, text="x").status_code == 200
    blocked = call(tg, "sendMessage", chat_id="8", text="x")
    assert blocked.json()["description"] == "Forbidden: bot was blocked by the user"
    assert call(tg, "sendMessage", chat_id=8, text="x").status_code == 403
    assert call(tg, "sendMessage", chat_id=8, text="x").status_code == 200
    tg.fail("sendMessage", 400, "message thread not found")
    answer = call(tg, "sendMessage", chat_id=8, text="x", message_thread_id=3)
    assert answer.json()["description"] == "Bad Request: message thread not found"


@pytest.mark.timeout(30)
def test_migrate_points_at_the_supergroup(tg: FakeTelegram):
    tg.migrate(-42, -1009)
    old = call(tg, "sendMessage", chat_id=-42, text="hello")
    assert old.status_code == 400
    assert old.json()["parameters"] == {"migrate_to_chat_id": -1009}
    assert old.json()["description"] == (
        "Bad Request: group chat was upgraded to a supergroup chat"
    )
    new = call(tg, "sendMessage", chat_id=-1009, text="hello")
    assert new.status_code == 200
    assert new.json()["result"]["chat"]["id"] == -1009
    assert [s["chat_id"] for s in tg.sent_to(-1009)] == [-1009]
    assert tg.sent_to(-42) == []


@pytest.mark.timeout(30)
def test_get_file_and_download(tg: FakeTelegram):
    file_id = tg.add_file(b"\xff\xd8jpeg", "photos/file_1.jpg")
    big = tg.add_file(b"big", "documents/big.pdf", size=25_000_000)
    tg.message("look", photo=file_id)
    tg.message("", document=big)
    updates = call(tg, "getUpdates").json()["result"]
    photo = updates[0]["message"]["photo"]
    assert photo[-1]["file_id"] == file_id and updates[0]["message"]["caption"] == "look"
    assert updates[1]["message"]["document"]["file_size"] == 25_000_000
    assert updates[1]["message"]["document"]["file_name"] == "big.pdf"
    info = call(tg, "getFile", file_id=file_id).json()["result"]
    assert info["file_path"] == "photos/file_1.jpg" and info["file_size"] == 6
    got = httpx.get(f"{tg.url}/file/bot{TOKEN}/{info['file_path']}", timeout=5)
    assert got.status_code == 200 and got.content == b"\xff\xd8jpeg"
    assert call(tg, "getFile", file_id=big).json()["result"]["file_size"] == 25_000_000
    thumb = call(tg, "getFile", file_id=photo[0]["file_id"]).json()["result"]
    assert httpx.get(f"{tg.url}/file/bot{TOKEN}/{thumb['file_path']}", timeout=5).is_success
    assert httpx.get(f"{tg.url}/file/botnope/photos/file_1.jpg", timeout=5).status_code == 401
    assert call(tg, "getFile", file_id="nope").status_code == 400


@pytest.mark.timeout(30)
def test_delete_webhook_with_drop_pending_updates_drops(tg: FakeTelegram):
    kept = tg.message("kept")
    assert call(tg, "deleteWebhook").json() == {"ok": True, "result": True}
    assert tg.pending == [kept]
    assert call(tg, "deleteWebhook", drop_pending_updates=True).status_code == 200
    assert tg.pending == [] and tg.dropped == [kept]
    assert [c["drop_pending_updates"] for c in tg.deleted_webhook_calls] == [False, True]
    assert call(tg, "getUpdates", timeout=0).json()["result"] == []


@pytest.mark.timeout(30)
def test_chat_actions_are_recorded(tg: FakeTelegram):
    started = time.monotonic()
    form = httpx.post(
        f"{tg.api_url}/sendChatAction", data={"chat_id": "7", "action": "typing"}, timeout=5
    )
    assert form.json() == {"ok": True, "result": True}
    [action] = tg.wait_actions(1)
    assert action["chat_id"] == 7 and action["action"] == "typing"
    assert action["at"] >= started
    assert call(tg, "sendChatAction", chat_id=7, action="dancing").status_code == 400


@pytest.mark.timeout(30)
def test_conflict_window_hang_and_revoke(tg: FakeTelegram):
    tg.conflict_for(60)
    assert call(tg, "getUpdates", timeout=0).status_code == 409
    tg.wait_conflicts(1)
    tg.conflict_for(0)  # the other instance is gone
    assert call(tg, "getUpdates", timeout=0).status_code == 200
    tg.hang_polls()
    hung = Poll(tg, timeout=0)
    tg.wait_held_polls(1)
    assert hung.is_alive()
    tg.unhang_polls()
    assert hung.result().json()["result"] == []
    tg.revoke_token()
    assert httpx.get(f"{tg.api_url}/getMe", timeout=5).status_code == 401


@pytest.mark.timeout(30)
def test_close_answers_a_held_poll_at_once():
    fake = FakeTelegram(token=TOKEN).__enter__()
    poll = Poll(fake, timeout=20)
    fake.wait_held_polls(1)
    started = time.monotonic()
    fake.close()
    assert time.monotonic() - started < 2
    poll.join(5)
    assert not poll.is_alive()
    assert poll.error is not None or poll.response is not None and poll.response.status_code == 503


@pytest.mark.timeout(30)
def test_the_fake_runs_in_its_own_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.telegram", "--token", TOKEN],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        update = httpx.post(f"{url}/_fake/message", json={"text": "hi"}, timeout=5).json()
        updates = httpx.get(f"{url}/bot{TOKEN}/getUpdates", timeout=5).json()["result"]
        assert [u["update_id"] for u in updates] == [update["result"]]
    finally:
        proc.terminate()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.timeout(30)
def test_forum_topics_and_replies_to_the_bot(tg: FakeTelegram):
    chat = -1001234
    topic = tg.message("in a topic", is_forum=True, thread_id=77, chat_id=chat)
    message = tg.update(topic)["message"]
    assert message["chat"]["is_forum"] is True and message["message_thread_id"] == 77
    assert message["reply_to_message"]["forum_topic_created"]  # Telegram's own quirk
    assert message["reply_to_message"]["from"]["id"] != BOT_ID
    sent = call(tg, "sendMessage", chat_id=chat, text="answer", message_thread_id=77,
                reply_parameters={"message_id": message["message_id"]})  # fmt: skip
    result = sent.json()["result"]
    assert result["reply_to_message"]["message_id"] == message["message_id"]
    reply = tg.update(tg.message("thanks", is_forum=True, thread_id=77, chat_id=chat,
                                 reply_to_bot=True))["message"]  # fmt: skip
    assert reply["reply_to_message"]["message_id"] == result["message_id"]
    assert reply["reply_to_message"]["from"]["id"] == BOT_ID
    [record] = tg.sent_to(chat)
    assert record["message_thread_id"] == 77
    assert record["reply_parameters"] == {"message_id": message["message_id"]}
