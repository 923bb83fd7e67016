"""Live replies end to end, the same stories on every platform that edits: `hermes serve`
as a process, the platform's fake, the fake model streaming slowly.

A streamed answer ends as one message whose text is the answer, edited a bounded
number of times; a 10,000-character answer ends as messages split the platform's
way; tool lines show under a streamed answer and go with the final text, or show in
a status message of their own (`tools`); `off` sends one message. SIGKILL of serve
mid-stream, then a restart: the chat ends with exactly one complete answer.

A platform's test gives a `Chat`: how the user talks, and the bot's messages in the
chat as the user sees them now (after edits), with the edits made.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Protocol

from hermes.delivery.split import chunks_for
from tests.adapters.serving import Serve, in_thread
from tests.fakes.openai import FakeOpenAI, stream_answer, tool_answer

INTERVAL = 0.5  # gateway.progress_interval in these stories
RESUMED = "(answered after hermes restarted) "


class Chat(Protocol):
    platform: str

    def say(self, text: str) -> None:
        """The user writes to the bot in their DM."""

    def now(self) -> list[str]:
        """The bot's messages in that DM, in order, as the user reads them now."""

    def edits(self) -> list[str]:
        """The texts the bot's messages there were edited to, in order."""

    def texts(self) -> list[str]:
        """Every text the bot's messages there had: each send's, then each edit's."""

    def wait(self, found: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Block (in a thread) until `found()` holds, looked at on every change of the fake."""

    def wait_connected(self, count: int) -> None:
        """Block (in a thread) until serve has connected `count` times."""


def configure(serve: Serve, mode: str | None = None) -> None:
    platform = f"    progress: {mode}\n" if mode else ""
    serve.configure(gateway=f"  progress_interval: {INTERVAL}\n", platform=platform)


def words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i} " for i in range(n)]


async def reads(chat: Chat, *texts: str) -> None:
    """Until the bot's messages read exactly `texts` (the last edit landed)."""

    def read() -> bool:
        return [m.strip() for m in chat.now()] == [t.strip() for t in texts]

    try:
        await in_thread(chat.wait, read, f"the messages {texts!r}")
    except TimeoutError:
        raise AssertionError(f"the messages read {chat.now()!r}, not {texts!r}") from None


async def start(serve: Serve, chat: Chat, mode: str | None = None) -> None:
    configure(serve, mode)
    serve.start()
    await in_thread(chat.wait_connected, 1)


async def a_streamed_answer_is_one_message_edited_at_most_once_an_interval(
    serve: Serve, model: FakeOpenAI, chat: Chat
) -> None:
    pieces = words(30)  # 3 s of streaming
    answer = "".join(pieces).strip()
    model.script(stream_answer(pieces, pause=0.1))
    await start(serve, chat)
    began = time.monotonic()
    chat.say("tell me slowly")
    await reads(chat, answer)
    took = time.monotonic() - began
    serve.stop()
    edits = chat.edits()
    assert 1 <= len(edits) <= took / INTERVAL + 1, (len(edits), took)
    assert all(answer.startswith(e.strip()) for e in edits)  # growing states of it


async def a_long_answer_ends_split_the_platforms_way(
    serve: Serve, model: FakeOpenAI, chat: Chat
) -> None:
    pieces = [f"line {i:03} " + "lorem ipsum dolor sit amet " * 3 + "\n" for i in range(110)]
    answer = "".join(pieces).strip()
    assert 9_900 < len(answer) < 10_100
    model.script(stream_answer(pieces, pause=0.02))
    await start(serve, chat)
    chat.say("a long one")
    expected = chunks_for(answer, chat.platform)
    await reads(chat, *expected)  # each message at the split the platform's limit asks
    serve.stop()


async def tool_lines_show_as_the_mode_says(
    serve: Serve, model: FakeOpenAI, chat: Chat, *, mode: str
) -> None:
    """A tool's line shows as it starts (a status message, or under the answer) and is
    ticked when it ends; in `stream` the answer replaces it, in `tools` it stays."""
    answer = "".join(words(10, "a")).strip()
    model.script(
        tool_answer(("terminal", {"command": "sleep 1.5; echo done"})),
        stream_answer(words(10, "a"), pause=0.2),  # 2 s: states with the tick show
    )
    model.delay = 1.0  # the model thinks before it calls the tool: the turn shows by then
    await start(serve, chat, mode)
    chat.say("run it")
    if mode == "stream":
        await reads(chat, answer)
    else:
        await reads(chat, "✓ terminal", answer)
    serve.stop()
    texts = chat.texts()
    assert "⏳ terminal" in texts[0]  # shown while it ran
    assert any("✓ terminal" in t for t in texts)


async def off_sends_one_message(serve: Serve, model: FakeOpenAI, chat: Chat) -> None:
    pieces = words(20)
    model.script(stream_answer(pieces, pause=0.1))
    await start(serve, chat, "off")
    chat.say("tell me")
    await reads(chat, "".join(pieces).strip())
    serve.stop()
    assert chat.edits() == []


async def a_kill_mid_stream_ends_with_one_complete_answer(
    serve: Serve, model: FakeOpenAI, chat: Chat
) -> None:
    model.script(stream_answer(words(100), pause=0.1))  # 10 s: it is killed before
    await start(serve, chat)
    chat.say("a story")
    await in_thread(chat.wait, lambda: len(chat.edits()) >= 1, "a message being written")
    serve.kill()
    partial = chat.now()
    assert len(partial) == 1 and partial[0].startswith("w0 w1")
    model.script(stream_answer(["The ", "whole ", "story."]))  # the resumed turn's
    serve.start()
    await reads(chat, RESUMED + "The whole story.")
    serve.stop()
    assert len(chat.now()) == 1  # the partial message became the answer: no second copy


STORIES = [
    a_streamed_answer_is_one_message_edited_at_most_once_an_interval,
    a_long_answer_ends_split_the_platforms_way,
    functools.partial(tool_lines_show_as_the_mode_says, mode="stream"),
    functools.partial(tool_lines_show_as_the_mode_says, mode="tools"),
    off_sends_one_message,
    a_kill_mid_stream_ends_with_one_complete_answer,
]


def story_name(story: Callable) -> str:
    """A story's test id: its function's name, and its mode where it takes one."""
    if isinstance(story, functools.partial):
        return f"{story.func.__name__}[{story.keywords['mode']}]"
    return story.__name__
