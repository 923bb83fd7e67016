"""Live replies on Telegram end to end (tests/adapters/live_flow.py): editMessageText."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.adapters import live_flow
from tests.adapters.telegram.serving import ANN
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


@pytest.mark.timeout(60)
async def test_a_streamed_answer_is_one_message(serve, model, tg):
    await live_flow.a_streamed_answer_is_one_message_edited_at_most_once_an_interval(
        serve, model, TelegramChat(tg)
    )


@pytest.mark.timeout(60)
async def test_a_long_answer_is_split(serve, model, tg):
    await live_flow.a_long_answer_ends_split_the_platforms_way(serve, model, TelegramChat(tg))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["stream", "tools"])
async def test_tool_lines(serve, model, tg, mode):
    await live_flow.tool_lines_show_as_the_mode_says(serve, model, TelegramChat(tg), mode)


@pytest.mark.timeout(60)
async def test_off_sends_one_message(serve, model, tg):
    await live_flow.off_sends_one_message(serve, model, TelegramChat(tg))


@pytest.mark.timeout(90)
async def test_a_kill_mid_stream_ends_with_one_answer(serve, model, tg):
    await live_flow.a_kill_mid_stream_ends_with_one_complete_answer(serve, model, TelegramChat(tg))
