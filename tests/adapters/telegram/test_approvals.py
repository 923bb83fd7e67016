"""Approvals on Telegram end to end (tests/adapters/approvals_flow.py): an inline keyboard
under the prompt, presses as callback queries (each answered), and `hermes approvals`
deciding a request that a turn waits on in serve."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adapters.approvals_flow import QUIET, SETTINGS, Shown, prompt, the_approvals_story, until
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.fakes.openai import text_answer, tool_answer
from tests.fakes.telegram import FakeTelegram, parse_markdown_v2
from tests.processes import hermes

BOB = 2002
TEAM = f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n"


class TelegramChat:
    """Ann's DM with the bot; Bob presses in it too (the fake does not mind)."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg

    def _who(self, owner: bool) -> dict[str, Any]:
        if owner:
            return {"user_id": ANN, "username": "ann", "first_name": "Ann"}
        return {"user_id": BOB, "username": "bob", "first_name": "Bob"}

    def say(self, text: str, owner: bool = True) -> None:
        self.tg.message(text, chat_id=ANN, **self._who(owner))

    def press(self, message: Shown, command: str, owner: bool = True) -> None:
        self.tg.press(message.record, command, **self._who(owner))

    def shown(self) -> list[Shown]:
        return [Shown(_plain(s), _commands(s), s) for s in self.tg.sent]

    def wait_shown(self, count: int) -> None:
        self.tg.wait_sent(count, 30.0)

    def wait_connected(self, count: int) -> None:
        pass  # updates wait for the next poll


def _plain(sent: dict[str, Any]) -> str:
    text = sent["text"]
    return parse_markdown_v2(text) if sent.get("parse_mode") == "MarkdownV2" else text


def _commands(sent: dict[str, Any]) -> tuple[str, ...]:
    rows = (sent.get("reply_markup") or {}).get("inline_keyboard") or ()
    return tuple(b["callback_data"] for row in rows for b in row)


@pytest.mark.timeout(120)
@pytest.mark.long
async def test_approvals_with_an_inline_keyboard(serve, model, tg, tmp_path):
    serve.configure(access=TEAM, top=SETTINGS, platform=QUIET)
    await the_approvals_story(serve, model, TelegramChat(tg), tmp_path, f"telegram {ANN} (ann)")
    assert len(tg.answered) == 3  # every press was answered (Bob's, Ann's two)
    assert not tg.unanswered


@pytest.mark.timeout(60)
async def test_hermes_approvals_lets_the_waiting_turn_go_on(serve, model, tg, tmp_path):
    ran = tmp_path / "ran"
    serve.configure(access=TEAM, platform=QUIET)
    model.script(tool_answer(("terminal", {"command": f"echo DROP TABLE t; touch {ran}"})),
                 text_answer("done"))  # fmt: skip
    serve.start()
    chat = TelegramChat(tg)
    chat.say("do it")
    _, request_id = await prompt(chat, 1)
    listed = await in_thread(hermes, "approvals")
    assert request_id in listed.stdout and "echo DROP TABLE t" in listed.stdout
    approved = await in_thread(hermes, "approvals", "approve", request_id)
    assert approved.returncode == 0 and approved.stdout.startswith(f"approved {request_id}")
    await until(chat, 2, lambda s: s.text == "done")
    again = await in_thread(hermes, "approvals", "deny", request_id)
    assert again.returncode == 2 and f"request {request_id} was approved by local" in again.stderr
    serve.stop()
    assert ran.exists()
