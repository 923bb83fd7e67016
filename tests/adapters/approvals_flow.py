"""Approvals end to end, the same story on every platform with buttons: `hermes serve`
as a process, the platform's fake, the fake model.

Ann (an owner) asks for a command the guard holds (`DROP TABLE` in an echo that
touches a file, so the test sees whether it ran). The prompt comes with buttons;
Bob (let in, not an owner) presses Approve and is told only an owner can; Ann's
press runs it and the reply quotes its output. Then a deny, an expiry (a 2 s
`agent.approval_timeout`), `/stop` during the wait, and SIGKILL of serve during
the wait followed by a restart: that command never runs, its request reads
expired, and the resumed turn says so.

A platform's test gives a `Chat`: how Ann and Bob talk and press, and what the bot
has sent, as plain text with the commands of its buttons.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import attrs

from tests.adapters.serving import Serve, in_thread
from tests.fakes.openai import FakeOpenAI, last_tool_result, text_answer, tool_answer
from tests.seed import rows

TIMEOUT = 2  # agent.approval_timeout, seconds: the expiry step waits it out
SETTINGS = f"agent:\n  approval_timeout: {TIMEOUT}\n"
QUIET = "    progress: off\n"  # the story counts messages: no progress message of a long wait


@attrs.frozen
class Shown:
    """A message the bot sent: its text as the user reads it, its buttons' commands, and
    the fake's own record of it (what a press names)."""

    text: str
    commands: tuple[str, ...]
    record: Any


class Chat(Protocol):
    def say(self, text: str, owner: bool = True) -> None:
        """Ann (owner) or Bob sends `text` to the bot in their DM."""

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        """Ann or Bob presses the button of `message` whose command is `command`."""

    def shown(self) -> list[Shown]:
        """What the bot has sent, in order."""

    def wait_shown(self, count: int) -> None:
        """Block (in a thread) until the bot has sent `count` messages."""

    def wait_connected(self, count: int) -> None:
        """Block (in a thread) until serve has connected `count` times (a platform that
        keeps nothing for a bot that is away loses what is said before)."""


def guarded(path: Path) -> tuple[str, dict[str, Any]]:
    return ("terminal", {"command": f"echo DROP TABLE t; touch {path}"})


async def until(chat: Chat, count: int, found: Callable[[Shown], bool]) -> Shown:
    """The first of the bot's first `count` messages that `found` says is it."""
    await in_thread(chat.wait_shown, count)
    shown = chat.shown()
    hit = next((s for s in shown[:count] if found(s)), None)
    assert hit is not None, [s.text for s in shown]
    return hit


async def prompt(chat: Chat, count: int) -> tuple[Shown, str]:
    """The `count`th message is an approval prompt: it, and its request's id."""
    await in_thread(chat.wait_shown, count)
    message = chat.shown()[count - 1]
    assert message.text.startswith("Approval needed"), [s.text for s in chat.shown()]
    request_id = message.text.split("(", 1)[1].split(")", 1)[0]
    assert message.commands == (
        f"/approve {request_id}", f"/approve {request_id} always", f"/deny {request_id}"
    )  # fmt: skip
    return message, request_id


def requests(serve: Serve) -> list[tuple[str, str, str | None]]:
    return rows(serve.home.state_db,
                "SELECT id, state, decided_by FROM approvals ORDER BY created_at")  # fmt: skip


async def the_approvals_story(
    serve: Serve, model: FakeOpenAI, chat: Chat, tmp_path: Path, ann: str
) -> list[str]:
    """The whole story; the ids of the five requests. `ann`: how a decision of Ann's is
    recorded ("telegram 1001 (Ann)")."""
    ran = [tmp_path / f"ran-{i}" for i in range(5)]
    model.script(
        tool_answer(guarded(ran[0])), last_tool_result,
        tool_answer(guarded(ran[1])), text_answer("not run then"),
        tool_answer(guarded(ran[2])), text_answer("nobody answered"),
        tool_answer(guarded(ran[3])),
        tool_answer(guarded(ran[4])),
    )  # fmt: skip
    serve.start()
    await in_thread(chat.wait_connected, 1)

    # Approved by the owner's press, after a press of Bob's changed nothing.
    chat.say("clean up the table")
    first, first_id = await prompt(chat, 1)
    assert f"touch {ran[0]}" in first.text and "wants to run" in first.text
    chat.press(first, f"/approve {first_id}", owner=False)
    await until(chat, 2, lambda s: s.text == "Only an owner can approve.")
    assert requests(serve)[0][1] == "pending" and not ran[0].exists()
    chat.press(first, f"/approve {first_id}")
    await until(chat, 4, lambda s: s.text.startswith(f"Approved ({first_id})"))
    output = await until(chat, 4, lambda s: s.text.startswith("it said: "))
    assert json.loads(output.text.removeprefix("it said: "))["output"].startswith("DROP TABLE t")
    assert ran[0].exists()

    # Denied by a press: the model is told, the turn finishes.
    chat.say("clean up again")
    second, second_id = await prompt(chat, 5)
    chat.press(second, f"/deny {second_id}")
    await until(chat, 7, lambda s: s.text.startswith(f"Denied ({second_id})"))
    await until(chat, 7, lambda s: s.text == "not run then")

    # Nobody answers: it expires after agent.approval_timeout and the turn finishes.
    chat.say("and once more")
    await prompt(chat, 8)
    await until(chat, 9, lambda s: s.text == "nobody answered")

    # /stop during the wait: cancelled, nothing runs.
    chat.say("one more time")
    await prompt(chat, 10)
    chat.say("/stop")
    await until(chat, 11, lambda s: s.text == "Stopped the running turn.")

    # SIGKILL during the wait, then a restart: never run, expired, and the turn says so.
    chat.say("last one")
    _, last_id = await prompt(chat, 12)
    serve.kill()
    serve.start()
    await in_thread(chat.wait_connected, 2)
    told = await until(chat, 13, lambda s: "waited for an owner's approval" in s.text)
    assert "the request expired and the command did not run" in told.text
    serve.stop()

    rows = requests(serve)
    assert [(r[1], r[2]) for r in rows] == [
        ("approved", ann), ("denied", ann), ("expired", None),
        ("cancelled", "the turn was stopped"), ("expired", "hermes restarted"),
    ], rows  # fmt: skip
    assert [p.exists() for p in ran] == [True, False, False, False, False]
    assert len(model.requests) == 8  # the killed turn was never asked again
    assert rows[-1][0] == last_id
    return [r[0] for r in rows]
