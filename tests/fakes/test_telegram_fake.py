"""Self-tests of the fake Telegram Bot API (tests/fakes/telegram.py), driven with
httpx synchronously; a held poll runs in a thread, and the test waits on the
fake's conditions, never by sleeping."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.telegram import (
    BOT_ID,
    BOT_USERNAME,
    CANT_EDIT,
    EDIT_NOT_FOUND,
    NOT_MODIFIED,
    FakeTelegram,
)

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


KEYBOARD = {"inline_keyboard": [[{"text": "Approve", "callback_data": "/approve 3f9a1c"},
                                 {"text": "Deny", "callback_data": "/deny 3f9a1c"}]]}  # fmt: skip
GONE = "Bad Request: query is too old and response timeout expired or query ID is invalid"


@pytest.mark.timeout(30)
def test_a_pressed_button_comes_as_a_callback_query_answered_once(tg: FakeTelegram):
    sent = call(tg, "sendMessage", chat_id=-4001, text="run sudo?", reply_markup=KEYBOARD)
    assert sent.json()["result"]["reply_markup"] == KEYBOARD  # as Telegram returns it
    [record] = tg.sent
    assert record["reply_markup"] == KEYBOARD
    pressed = tg.press(record, "/deny 3f9a1c", user_id=2002, username="bob", first_name="Bob")
    [update] = call(tg, "getUpdates", timeout=0,
                    allowed_updates=["message", "callback_query"]).json()["result"]  # fmt: skip
    assert update["update_id"] == pressed
    query = update["callback_query"]
    assert query["from"] == {"id": 2002, "is_bot": False, "first_name": "Bob", "username": "bob"}
    assert query["data"] == "/deny 3f9a1c" and query["chat_instance"]
    assert query["message"] == sent.json()["result"]  # the bot's message as stored
    assert tg.unanswered == [query["id"]]
    assert call(tg, "answerCallbackQuery", callback_query_id=query["id"]).json() == {
        "ok": True, "result": True,
    }  # fmt: skip
    [answer] = tg.wait_answered(1)
    told = [answer[k] for k in ("callback_query_id", "update_id", "data", "text", "show_alert")]
    assert told == [query["id"], pressed, "/deny 3f9a1c", None, False]
    assert tg.unanswered == []
    for query_id in (query["id"], "12345"):  # answered already; never given
        again = call(tg, "answerCallbackQuery", callback_query_id=query_id)
        assert again.status_code == 400 and again.json()["description"] == GONE
    by_label = tg.press(record["message_id"], label="Approve")
    second = tg.update(by_label)["callback_query"]
    assert second["data"] == "/approve 3f9a1c" and second["id"] != query["id"]
    assert second["from"]["id"] == 1001  # Ann, by default
    assert len(tg.answered) == 1


@pytest.mark.timeout(30)
def test_a_press_needs_a_button_the_message_carries(tg: FakeTelegram):
    plain = call(tg, "sendMessage", chat_id=7, text="no buttons").json()["result"]
    with pytest.raises(ValueError, match="no button"):
        tg.press(plain["message_id"], "/approve 1")
    with pytest.raises(ValueError, match="no message 999"):
        tg.press(999, "/approve 1")
    with pytest.raises(ValueError, match="its command or its label"):
        tg.press(plain["message_id"])
    assert tg.pending == []


@pytest.mark.timeout(30)
def test_a_press_reaches_only_a_poller_that_allows_callback_queries(tg: FakeTelegram):
    sent = call(tg, "sendMessage", chat_id=7, text="?", reply_markup=KEYBOARD).json()["result"]
    tg.press(sent, "/approve 3f9a1c")
    kept = tg.message("hi")
    updates = call(tg, "getUpdates", timeout=0, allowed_updates=["message"]).json()["result"]
    assert [u["update_id"] for u in updates] == [kept]
    assert tg.allowed_updates == ["message"]


@pytest.mark.timeout(30)
def test_keyboards_are_checked_as_telegram_does(tg: FakeTelegram):
    def refused(markup: Any) -> str:
        answer = call(tg, "sendMessage", chat_id=7, text="x", reply_markup=markup)
        assert answer.status_code == 400
        return answer.json()["description"]

    long_data = [[{"text": "Go", "callback_data": "/approve " + "x" * 56}]]  # 65 bytes
    assert refused({"inline_keyboard": long_data}) == "Bad Request: BUTTON_DATA_INVALID"
    empty_data = [[{"text": "Go", "callback_data": ""}]]
    assert refused({"inline_keyboard": empty_data}) == "Bad Request: BUTTON_DATA_INVALID"
    assert "Text buttons are unallowed" in refused({"inline_keyboard": [[{"text": "Go"}]]})
    assert "Array of Arrays" in refused({"inline_keyboard": [{"text": "Go"}]})
    assert tg.sent == [] and len(tg.refused) == 4
    fits = [[{"text": "Go", "callback_data": "/approve " + "é" * 27}]]  # 63 bytes
    assert call(tg, "sendMessage", chat_id=7, text="x",
                reply_markup={"inline_keyboard": fits}).status_code == 200  # fmt: skip


@pytest.mark.timeout(30)
def test_a_press_over_the_remote_control(tg: FakeTelegram):
    sent = call(tg, "sendMessage", chat_id=7, text="?", reply_markup=KEYBOARD).json()["result"]
    answer = httpx.post(f"{tg.url}/_fake/press", timeout=5, json={
        "message": sent["message_id"], "command": "/approve 3f9a1c", "user_id": 1001,
    }).json()  # fmt: skip
    update = tg.update(answer["result"])
    state = httpx.get(f"{tg.url}/_fake/state", timeout=5).json()["result"]
    assert state["unanswered"] == [update["callback_query"]["id"]] and state["answered"] == []
    wrong = httpx.post(f"{tg.url}/_fake/press", timeout=5, json={"message": 999, "label": "x"})
    assert wrong.status_code == 400 and "no message 999" in wrong.json()["description"]


def edit(tg: FakeTelegram, chat_id: int, message_id: int, text: str, **params: Any) -> Any:
    """An editMessageText: its JSON answer."""
    return call(tg, "editMessageText", chat_id=chat_id, message_id=message_id, text=text,
                **params).json()  # fmt: skip


@pytest.mark.timeout(30)
def test_an_edit_replaces_what_the_user_sees(tg: FakeTelegram):
    first = call(tg, "sendMessage", chat_id=7, text="Hel", reply_markup=KEYBOARD).json()["result"]
    second = call(tg, "sendMessage", chat_id=7, text="after").json()["result"]
    call(tg, "sendMessage", chat_id=8, text="elsewhere")
    tg.message("a user's", chat_id=7, user_id=7)
    mid = first["message_id"]
    answer = edit(tg, 7, mid, "*Hello*, world\\.", parse_mode="MarkdownV2")
    assert answer["ok"] is True
    assert answer["result"]["text"] == "Hello, world." and answer["result"]["edit_date"]
    assert "reply_markup" not in answer["result"]  # none given: the keyboard goes
    assert tg.shown(7) == ["Hello, world.", "after"]  # the bot's, in order, as shown now
    assert tg.shown("8") == ["elsewhere"]
    now = tg.message_now(mid)
    assert now["text"] == "Hello, world." and "reply_markup" not in now
    assert edit(tg, 7, mid, "Hello, world.", reply_markup=KEYBOARD)["ok"]  # modified: keyboard
    assert tg.message_now(mid)["reply_markup"] == KEYBOARD
    [one, two] = tg.wait_edits(2, message_id=mid)
    assert (one["chat_id"], one["message_id"], one["parse_mode"]) == (7, mid, "MarkdownV2")
    assert one["text"] == "*Hello*, world\\." and one["reply_markup"] is None
    assert (two["text"], two["parse_mode"], two["reply_markup"]) == (
        "Hello, world.", None, KEYBOARD,
    )  # fmt: skip
    assert tg.edits == [one, two] and one["at"] <= two["at"]
    assert tg.message_now(second["message_id"]).get("edit_date") is None
    assert tg.sent_to(7)[0]["text"] == "Hel"  # what was sent stays as it was sent


@pytest.mark.timeout(30)
def test_an_edit_to_the_same_content_is_not_modified(tg: FakeTelegram):
    mid = call(tg, "sendMessage", chat_id=7, text="Done\\.", parse_mode="MarkdownV2",
               reply_markup=KEYBOARD).json()["result"]["message_id"]  # fmt: skip
    same = edit(tg, 7, mid, "Done\\.", parse_mode="MarkdownV2", reply_markup=KEYBOARD)
    assert same == {"ok": False, "error_code": 400, "description": NOT_MODIFIED}
    assert NOT_MODIFIED.startswith("Bad Request: message is not modified: specified new")
    assert edit(tg, 7, mid, "Done\\.", parse_mode="MarkdownV2")["ok"]  # the keyboard goes
    again = edit(tg, 7, mid, "Done\\.", parse_mode="MarkdownV2")
    assert again["description"] == NOT_MODIFIED
    assert len(tg.edits) == 1
    assert [e["description"] for e in tg.wait_errors(2, method="editMessageText")] == [
        NOT_MODIFIED, NOT_MODIFIED,
    ]  # fmt: skip


@pytest.mark.timeout(30)
def test_an_edit_of_a_message_gone_or_not_the_bots_is_refused(tg: FakeTelegram):
    mid = call(tg, "sendMessage", chat_id=7, text="one").json()["result"]["message_id"]
    users = tg.update(tg.message("mine", chat_id=7, user_id=7))["message"]["message_id"]
    assert edit(tg, 7, 999, "x")["description"] == EDIT_NOT_FOUND
    assert edit(tg, 8, mid, "x")["description"] == EDIT_NOT_FOUND  # not in that chat
    assert edit(tg, 7, users, "x")["description"] == CANT_EDIT
    assert edit(tg, 7, mid, "a-b", parse_mode="MarkdownV2")["description"].startswith(
        "Bad Request: can't parse entities: "
    )  # the text is checked as a send's
    assert edit(tg, 7, mid, "")["description"] == "Bad Request: message text is empty"
    assert edit(tg, 7, mid, "😀" * 2049)["description"] == "Bad Request: MESSAGE_TOO_LONG"
    tg.delete_message(mid)
    assert edit(tg, 7, mid, "x") == {"ok": False, "error_code": 400,
                                     "description": EDIT_NOT_FOUND}  # fmt: skip
    assert tg.shown(7) == [] and tg.edits == []
    with pytest.raises(ValueError, match="no message 999"):
        tg.delete_message(999)
    tg.migrate(-42, -1009)
    moved = edit(tg, -42, mid, "x")
    assert moved["parameters"] == {"migrate_to_chat_id": -1009}


@pytest.mark.timeout(30)
def test_a_429_on_an_edit_carries_retry_after_and_is_counted(tg: FakeTelegram):
    mid = call(tg, "sendMessage", chat_id=7, text="one").json()["result"]["message_id"]
    tg.fail("editMessageText", 429, retry_after=7, chat_id=7)
    tg.fail("sendMessage", 429, retry_after=2)
    assert edit(tg, 8, mid, "two")["description"] == EDIT_NOT_FOUND  # another chat: no fault
    limited = call(tg, "editMessageText", chat_id=7, message_id=mid, text="two")
    assert limited.status_code == 429
    assert limited.json() == {
        "ok": False, "error_code": 429, "description": "Too Many Requests: retry after 7",
        "parameters": {"retry_after": 7},
    }  # fmt: skip
    assert call(tg, "sendMessage", chat_id=7, text="x").status_code == 429
    assert tg.rate_limited == 2
    assert edit(tg, 7, mid, "two")["ok"] and tg.shown(7) == ["two"]
    state = httpx.get(f"{tg.url}/_fake/state", timeout=5).json()["result"]
    assert state["rate_limited"] == 2 and [e["text"] for e in state["edits"]] == ["two"]
    deleted = httpx.post(f"{tg.url}/_fake/delete_message", json={"message_id": mid}, timeout=5)
    assert deleted.json() == {"ok": True, "result": None} and tg.shown(7) == []


def test_flood_control_refuses_a_chats_fourth_message_at_once_and_counts_it(tg: FakeTelegram):
    tg.limit_rate(per_second=30.0, per_chat=1.0, burst=30, chat_burst=3)
    answers = [call(tg, "sendMessage", chat_id=1001, text=f"m{n}") for n in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 429]  # 3 + 1 of slack
    assert answers[-1].json()["parameters"]["retry_after"] == 1
    assert call(tg, "sendMessage", chat_id=1002, text="another chat").status_code == 200
    assert call(tg, "sendChatAction", chat_id=1001, action="typing").status_code == 200
    assert tg.rate_limited == 1


def upload(
    tg: FakeTelegram, method: str, field: str, content: bytes, name: str = "report.pdf",
    mime: str = "application/pdf", **params: Any,
) -> httpx.Response:  # fmt: skip
    """A file send as a multipart form: the file as the part `field`, the other
    parameters as text (JSON text where nested)."""
    data = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
    files = {field: (name, content, mime)}
    return httpx.post(f"{tg.api_url}/{method}", data=data, files=files, timeout=10)


@pytest.mark.timeout(30)
def test_a_document_upload_is_recorded_and_downloadable(tg: FakeTelegram):
    content = b"%PDF-1.7\n" + bytes(range(256)) * 40
    started = time.monotonic()
    answer = upload(tg, "sendDocument", "document", content, chat_id=-1001234,
                    caption="the *report*", parse_mode="MarkdownV2", message_thread_id=77,
                    reply_parameters={"message_id": 5})  # fmt: skip
    assert answer.status_code == 200, answer.json()
    message = answer.json()["result"]
    document = message["document"]
    assert document["file_name"] == "report.pdf" and document["mime_type"] == "application/pdf"
    assert document["file_size"] == len(content) and document["file_unique_id"]
    assert message["caption"] == "the report" and "text" not in message
    assert message["from"]["id"] == BOT_ID and message["chat"]["id"] == -1001234
    assert message["message_thread_id"] == 77 and message["date"]
    [record] = tg.wait_uploads()
    assert record == {
        "method": "sendDocument", "chat_id": -1001234, "message_id": message["message_id"],
        "field": "document", "file_id": document["file_id"], "resent": False,
        "file_name": "report.pdf", "mime_type": "application/pdf", "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(), "caption": "the *report*",
        "reply_parameters": {"message_id": 5}, "message_thread_id": 77,
        "at": record["at"], "content": content,
    }  # fmt: skip
    assert record["at"] >= started
    [sent] = tg.sent  # a send like any other: shown() and sent_to() see it
    assert sent["method"] == "sendDocument" and sent["text"] == "the *report*"
    assert sent["document"] == {"file_name": "report.pdf", "mime_type": "application/pdf",
                                "size": len(content)}  # fmt: skip
    assert tg.shown(-1001234) == ["the report"]
    info = call(tg, "getFile", file_id=document["file_id"]).json()["result"]
    assert info["file_size"] == len(content) and info["file_path"].endswith(".pdf")
    got = httpx.get(f"{tg.url}/file/bot{TOKEN}/{info['file_path']}", timeout=5)
    assert got.status_code == 200 and got.content == content
    assert tg.downloads == [info["file_path"]]
    again = call(tg, "sendDocument", chat_id=7, document=document["file_id"])  # by file_id
    assert again.json()["result"]["document"]["file_id"] == document["file_id"]
    [_, resent] = tg.wait_uploads(2)
    assert resent["resent"] is True and resent["sha256"] == record["sha256"]
    assert resent["caption"] is None and tg.sent[1]["text"] == ""
    assert call(tg, "sendMessage", chat_id=7, text="x").status_code == 200
    assert [s["method"] for s in tg.sent] == ["sendDocument", "sendDocument", "sendMessage"]
    unknown = call(tg, "sendDocument", chat_id=7, document="BQACnope")
    assert unknown.json()["description"] == (
        "Bad Request: wrong file identifier/HTTP URL specified"
    )
    edit = call(tg, "editMessageText", chat_id=7, message_id=again.json()["result"]["message_id"],
                text="x")  # fmt: skip
    assert edit.json()["description"] == "Bad Request: there is no text in the message to edit"


@pytest.mark.timeout(30)
def test_a_photo_and_a_voice_are_answered_with_their_objects(tg: FakeTelegram):
    jpeg = b"\xff\xd8\xff\xe0" + b"p" * 5000
    photo = upload(tg, "sendPhoto", "photo", jpeg, "cat.jpg", "image/jpeg", chat_id=7,
                   caption="a cat", reply_markup=KEYBOARD)  # fmt: skip
    assert photo.status_code == 200, photo.json()
    message = photo.json()["result"]
    sizes = message["photo"]
    assert len(sizes) >= 2
    for size in sizes:
        assert size.keys() == {"file_id", "file_unique_id", "width", "height", "file_size"}
    assert [s["width"] for s in sizes] == sorted(s["width"] for s in sizes)
    assert sizes[-1]["file_size"] == len(jpeg)
    assert message["caption"] == "a cat" and message["reply_markup"] == KEYBOARD
    largest = call(tg, "getFile", file_id=sizes[-1]["file_id"]).json()["result"]
    got = httpx.get(f"{tg.url}/file/bot{TOKEN}/{largest['file_path']}", timeout=5)
    assert got.content == jpeg
    ogg = b"OggS" + b"v" * 3000
    voice = upload(tg, "SENDVOICE", "voice", ogg, "note.ogg", "audio/ogg", chat_id="7",
                   duration=4)  # fmt: skip
    assert voice.status_code == 200, voice.json()
    result = voice.json()["result"]
    shape = {k: result["voice"][k] for k in ("duration", "mime_type", "file_size")}
    assert shape == {"duration": 4, "mime_type": "audio/ogg", "file_size": len(ogg)}
    assert result["voice"].keys() == {
        "file_id", "file_unique_id", "duration", "mime_type", "file_size",
    }  # fmt: skip
    assert "caption" not in result and result["message_id"] > message["message_id"]
    first, second = tg.wait_uploads(2, chat_id=7)
    assert (first["field"], first["method"], first["size"]) == ("photo", "sendPhoto", len(jpeg))
    assert (second["field"], second["method"], second["content"]) == ("voice", "sendVoice", ogg)
    assert tg.shown(7) == ["a cat", ""]
    pressed = tg.press(message, "/approve 3f9a1c")  # its keyboard works as a message's
    assert tg.update(pressed)["callback_query"]["message"]["message_id"] == message["message_id"]
    too_big = upload(tg, "sendPhoto", "photo", b"p" * (10 * 1024 * 1024 + 1), "big.jpg",
                     "image/jpeg", chat_id=7)  # fmt: skip
    assert too_big.status_code == 400
    assert too_big.json()["description"] == "Bad Request: file is too big"
    assert len(tg.uploads) == 2


@pytest.mark.timeout(30)
def test_an_upload_over_max_upload_is_413_and_not_recorded(tg: FakeTelegram):
    tg.max_upload = 1000
    answer = upload(tg, "sendDocument", "document", b"d" * 1001, chat_id=7, caption="big")
    assert answer.status_code == 413
    assert answer.json() == {
        "ok": False, "error_code": 413, "description": "Request Entity Too Large",
    }  # fmt: skip
    assert tg.uploads == [] and tg.sent == []
    [refused] = tg.wait_refused(1)
    assert refused["method"] == "sendDocument" and refused["error_code"] == 413
    assert refused["document"]["size"] == 1001 and refused["text"] == "big"
    assert upload(tg, "sendDocument", "document", b"d" * 1000, chat_id=7).status_code == 200
    assert [u["size"] for u in tg.wait_uploads(1)] == [1000]
    state = httpx.get(f"{tg.url}/_fake/state", timeout=5).json()["result"]
    assert [r["error_code"] for r in state["refused"]] == [413]


@pytest.mark.timeout(30)
def test_a_send_without_its_file_is_refused(tg: FakeTelegram):
    for method, field in (("sendDocument", "document"), ("sendPhoto", "photo"),
                          ("sendVoice", "voice")):  # fmt: skip
        answer = upload(tg, method, "other", b"x", chat_id=7)
        assert answer.status_code == 400
        assert answer.json()["description"] == f"Bad Request: there is no {field} in the request"
    attached = httpx.post(f"{tg.api_url}/sendDocument", timeout=5,
                          data={"chat_id": "7", "document": "attach://file0"},
                          files={"file0": ("a.txt", b"attached", "text/plain")})  # fmt: skip
    assert attached.json()["result"]["document"]["file_name"] == "a.txt"
    assert len(tg.refused) == 3 and [u["content"] for u in tg.uploads] == [b"attached"]


@pytest.mark.timeout(30)
def test_a_fault_on_send_document_is_answered_then_it_works(tg: FakeTelegram):
    tg.fail("sendDocument", 429, retry_after=5)
    limited = upload(tg, "sendDocument", "document", b"doc", chat_id=7)
    assert limited.status_code == 429
    assert limited.json() == {
        "ok": False, "error_code": 429, "description": "Too Many Requests: retry after 5",
        "parameters": {"retry_after": 5},
    }  # fmt: skip
    assert tg.rate_limited == 1 and tg.uploads == []
    assert tg.wait_refused(1)[0]["parameters"] == {"retry_after": 5}
    tg.migrate(-42, -1009)
    moved = upload(tg, "sendDocument", "document", b"doc", chat_id=-42)
    assert moved.json()["parameters"] == {"migrate_to_chat_id": -1009}
    assert upload(tg, "sendDocument", "document", b"doc", chat_id=7).status_code == 200
    assert len(tg.wait_uploads(1)) == 1


@pytest.mark.timeout(30)
def test_a_caption_is_checked_as_a_text_is(tg: FakeTelegram):
    too_long = upload(tg, "sendDocument", "document", b"x", chat_id=7, caption="😀" * 513)
    assert too_long.status_code == 400  # 1026 UTF-16 units
    assert too_long.json()["description"] == "Bad Request: message caption is too long"
    bad = upload(tg, "sendDocument", "document", b"x", chat_id=7, caption="a-b",
                 parse_mode="MarkdownV2")  # fmt: skip
    assert bad.json()["description"].startswith("Bad Request: can't parse entities: ")
    fits = upload(tg, "sendDocument", "document", b"x", chat_id=7,
                  caption="*" + "a" * 1024 + "*", parse_mode="MarkdownV2")  # fmt: skip
    assert fits.status_code == 200, fits.json()  # 1026 as sent, 1024 once parsed
    assert len(tg.refused) == 2 and len(tg.wait_uploads(1)) == 1


@pytest.mark.timeout(30)
def test_a_big_file_is_neither_copied_when_added_nor_when_downloaded(tg: FakeTelegram):
    content = b"z" * (5 * 1024 * 1024)
    tracemalloc.start()
    try:
        path = call(tg, "getFile", file_id=tg.add_file(content)).json()["result"]["file_path"]
        with socket.create_connection(tg.server.server_address[:2], timeout=10) as conn:
            conn.sendall(f"GET /file/bot{TOKEN}/{path} HTTP/1.1\r\nHost: x\r\n"
                         "Connection: close\r\n\r\n".encode())  # fmt: skip
            received, piece = 0, bytearray(64 * 1024)
            while count := conn.recv_into(piece):
                received += count
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received > len(content)  # the headers and the whole file
    assert peak < len(content) // 2  # a copy would be 5 MB
