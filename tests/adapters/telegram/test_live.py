"""Live replies on Telegram end to end (tests/adapters/live_flow.py): editMessageText."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.fakes.openai import stream_answer
from tests.fakes.telegram import FakeTelegram, parse_markdown_v2


class TelegramChat:
    platform = "telegram"

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg

    def say(self, text: str) -> None:
        self.tg.message(text, chat_id=ANN)

    def now(self) -> list[str]:
        return self.tg.shown(ANN)

    def edits(self) -> list[str]:
        return [_plain(e) for e in self.tg.edits if e["chat_id"] == ANN]

    def texts(self) -> list[str]:
        return [_plain(s) for s in self.tg.sent if s["chat_id"] == ANN] + self.edits()

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        self.tg.wait_until(lambda _: found(), timeout, what)

    def wait_connected(self, count: int) -> None:
        pass  # updates wait for the next poll


def _plain(record: dict) -> str:
    text = record["text"]
    return parse_markdown_v2(text) if record.get("parse_mode") == "MarkdownV2" else text


@pytest.mark.timeout(90)
@pytest.mark.parametrize("story", live_flow.STORIES, ids=live_flow.story_name)
async def test_live_replies(serve, model, tg, story):
    await story(serve, model, TelegramChat(tg))


@pytest.mark.timeout(120)
async def test_a_burst_of_streams_keeps_first_messages_flowing_and_provokes_no_429(
    serve, model, tg
):
    """50 chats stream at once under Telegram's flood control (the fake's: 30 messages a
    second, one a second per chat): every chat's first message goes within the pace
    (edits give way to it), no message is refused 429, and each chat ends with one
    message reading its answer."""
    chats = [3000 + n for n in range(50)]
    pieces = live_flow.words(30)  # 3 s each
    model.script(*[stream_answer(pieces, pause=0.1) for _ in chats])
    tg.limit_rate()
    serve.configure(gateway=f"  progress_interval: {live_flow.INTERVAL}\n",
                    access="    allow_all_users: true\n")  # fmt: skip
    serve.start()
    asked = {}
    for chat in chats:
        tg.message("tell me", chat_id=chat, user_id=chat, username=f"u{chat}")
        asked[chat] = time.monotonic()
    answer = "".join(pieces).strip()
    await in_thread(tg.wait_until, lambda fake: all(
        [m.strip() for m in fake.shown(c)] == [answer] for c in chats
    ), 60.0, "every chat answered")  # fmt: skip
    serve.stop()
    first = {s["chat_id"]: s["at"] for s in reversed(tg.sent)}  # each chat's first send
    waited = max(first[c] - asked[c] for c in chats)
    # The turn shows after an interval; then 50 first messages at 30 a second.
    assert waited <= live_flow.INTERVAL + len(chats) / 30 + 1.5, waited
    refused = [(e.get("method"), e.get("chat_id"), round(e["at"] - min(asked.values()), 2))
               for e in tg.errors if e.get("error_code") == 429]  # fmt: skip
    assert tg.rate_limited == 0, refused
