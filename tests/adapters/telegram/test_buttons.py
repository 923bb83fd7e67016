"""Buttons on Telegram, through the adapter in this process (tests/adapters/inprocess.py)
against the fake Bot API: a send's buttons as an inline keyboard (a command too long
for callback_data left off), and a press (a callback_query) admitted as its command from
the presser, addressed to the bot, in reply to the message, then answered; a press
delivered again is admitted once by the journal (a real state.db), and answered again."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import trio

from hermes.adapters.contract import (
    Button,
    ChatType,
    Cursor,
    InboundEvent,
    SendRequest,
    Sent,
    Target,
)
from hermes.adapters.telegram.adapter import TelegramAdapter
from hermes.adapters.telegram.config import TelegramConfig
from hermes.adapters.telegram.keyboard import inline_keyboard
from hermes.config import Secrets
from hermes.gateway.approvals import buttons
from hermes.gateway.journal import admit, admitted
from hermes.state.db import Db
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN, TOKEN, TOKEN_VAR
from tests.fakes.telegram import QUERY_GONE, FakeTelegram

PROMPT = APPROVE, ALWAYS, DENY = buttons("3f9a1c")  # the approval prompt's
KEYBOARD = {"inline_keyboard": [[{"text": b.label, "callback_data": b.command} for b in PROMPT]]}
FORUM, TOPIC = -1001000000077, 77
BOB = 2002
T0 = 1_800_000_000.0


class Journal(Admissions):
    """Admission into the real inbound journal: False for a key it holds already."""

    def __init__(self, db: Db) -> None:
        super().__init__()
        self.db = db
        self.outcomes: list[tuple[str, bool]] = []  # (event id, added), once written
        self._written = trio.Event()

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        await super().__call__(event, cursor)  # recorded; held or failed if the test says
        added = await self.db.write(admit, event, T0, None, cursor)
        self.outcomes.append((event.event_id, added))
        self._written.set()
        self._written = trio.Event()
        return added

    async def wait_written(self, event_id: str, timeout: float = 10.0) -> None:
        """Until an admission of `event_id` was written (a new event or a duplicate)."""
        with trio.fail_after(timeout):
            while all(key != event_id for key, _ in self.outcomes):
                await self._written.wait()


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake
        assert fake.internal_errors == []


@asynccontextmanager
async def adapter_on(tg: FakeTelegram, admissions: Admissions) -> AsyncIterator[Running]:
    config = TelegramConfig(token_env=TOKEN_VAR, base_url=tg.url, poll_timeout=1)
    secrets = Secrets({TOKEN_VAR: TOKEN}, frozenset())
    async with running(TelegramAdapter, "telegram", config, secrets, admissions) as run:
        await in_thread(tg.wait_held_polls, 1)
        yield run


async def prompt(run: Running, target: Target, *buttons: Button, plain: bool = False) -> str:
    """Send the approval prompt with `buttons`: its message id."""
    request = SendRequest(target, "Run `sudo ls`?", f"key-{len(buttons)}-{plain}",
                          plain=plain, buttons=buttons)  # fmt: skip
    result = await run.send(request)
    assert isinstance(result, Sent) and result.message_id is not None, result
    return result.message_id


@pytest.mark.timeout(30)
async def test_a_send_shows_its_buttons_and_leaves_off_one_telegram_would_refuse(tg, caplog):
    caplog.set_level(logging.WARNING, logger="hermes.adapters.telegram")
    too_long = Button("Too long", "/approve " + "9" * 56)  # 65 bytes of callback_data
    async with adapter_on(tg, Admissions()) as run:
        dm = Target("telegram", str(ANN))
        await prompt(run, dm, APPROVE, too_long, ALWAYS, DENY)
        await prompt(run, dm, *PROMPT, plain=True)  # a formatted send refused goes so
        await prompt(run, dm, too_long)
        await prompt(run, dm)
    markups = [s.get("reply_markup") for s in tg.sent]
    assert markups == [KEYBOARD, KEYBOARD, None, None]
    assert tg.sent[1].get("parse_mode") is None  # the plain one
    assert tg.refused == []  # never a failed send
    left_off = [r.getMessage() for r in caplog.records if "left off" in r.getMessage()]
    assert len(left_off) == 2 and all("'Too long'" in line for line in left_off)


def test_a_row_keeps_what_telegram_takes_measuring_callback_data_in_bytes():
    fits = Button("Ça", "/approve " + "é" * 27)  # 63 bytes, 36 characters
    over = Button("Trop", "/approve " + "é" * 28)  # 65 bytes
    many = tuple(Button(str(n), f"/pick {n}") for n in range(9))
    markup, left_off = inline_keyboard((fits, over, Button(" ", "/x"), Button("Empty", "")))
    assert markup == {"inline_keyboard": [[{"text": "Ça", "callback_data": fits.command}]]}
    assert [line.split(" left off: ")[1] for line in left_off] == [
        "its command must be 1 to 64 bytes", "its label is empty",
        "its command must be 1 to 64 bytes",
    ]  # fmt: skip
    markup, left_off = inline_keyboard(many)
    assert len(markup["inline_keyboard"][0]) == 8 and left_off == [
        "button '8' ('/pick 8') left off: a row holds 8 buttons"
    ]


@pytest.mark.timeout(30)
async def test_a_press_is_its_command_from_the_presser_answered_after_admission(tg):
    events = Admissions()
    async with adapter_on(tg, events) as run:
        asked = tg.message("@hermes_test_bot run it", is_forum=True, chat_id=FORUM,
                           thread_id=TOPIC, user_id=BOB, username="bob")  # fmt: skip
        await events.wait_for(str(asked))
        typed = events.events[-1]
        carrier = await prompt(run, typed.target(), *PROMPT)
        [sent] = tg.sent
        assert sent["reply_markup"] == KEYBOARD and sent["message_thread_id"] == TOPIC
        events.hold(APPROVE.command)  # the journal takes its time over the press
        update_id = tg.press(sent, APPROVE.command, user_id=ANN, username="ann")
        query_id = tg.update(update_id)["callback_query"]["id"]
        await events.wait_for(f"cb-{query_id}")
        between = await run.send(SendRequest(typed.target(), "meanwhile", "between"))
        assert isinstance(between, Sent)  # a round trip later, while admission holds it:
        assert tg.unanswered == [query_id]  # the spinner waits for the admission
        events.release(APPROVE.command)
        [answer] = await in_thread(tg.wait_answered, 1)
        assert answer["callback_query_id"] == query_id and answer["text"] is None
        await in_thread(tg.wait_acked, update_id)  # the offset moved past it
    press = events.events[-1]
    assert press == InboundEvent(
        platform="telegram",
        event_id=f"cb-{query_id}",
        chat_type=ChatType.GROUP,
        chat_id=str(FORUM),
        user_id=str(ANN),  # who pressed, not who asked
        text=APPROVE.command,
        thread_id=str(TOPIC),
        user_name="ann",
        message_id=carrier,
        reply_to=carrier,
        mentioned=True,  # addressed to the bot, in a group too
    )
    assert press.target() == typed.target()  # the chat and topic a typed command has
    assert events.ids.count(press.event_id) == 1


@pytest.mark.timeout(30)
async def test_a_press_delivered_again_is_admitted_once_and_answered_again(tg, registry, tmp_path):
    async with Db(registry, tmp_path / "state.db") as db:
        journal = Journal(db)
        async with adapter_on(tg, journal) as run:
            carrier = await prompt(run, Target("telegram", str(ANN)), *PROMPT)
            tg.hang_polls()  # the press and a message come in one batch
            pressed = tg.press(int(carrier), DENY.command)
            later = str(tg.message("later"))
            journal.hold("later")
            tg.unhang_polls()
            query_id = tg.update(pressed)["callback_query"]["id"]
            await journal.wait_for(later)
            await in_thread(tg.wait_answered, 1)  # the press, admitted, is answered
            journal.fail("later")  # the batch's offset never commits: it comes again
            wait = functools.partial(tg.wait_errors, 1, method="answerCallbackQuery")
            [refused] = await in_thread(wait)
            await journal.wait_written(later)  # in the batch that came again, after the press
            assert run.restarts == 1
        rows = [e.event_id for e in await db.read(admitted)]
    event_id = f"cb-{query_id}"
    assert [ok for key, ok in journal.outcomes if key == event_id] == [True, False]
    assert rows.count(event_id) == 1 and rows.count(later) == 1
    assert [a["callback_query_id"] for a in tg.answered] == [query_id]
    assert refused["description"] == QUERY_GONE  # Telegram: answered already


@pytest.mark.timeout(30)
async def test_a_press_without_a_chat_or_a_command_is_answered_and_skipped(tg):
    events = Admissions()
    presser = {"id": ANN, "is_bot": False, "first_name": "Ann"}
    async with adapter_on(tg, events):
        tg.inject(
            {
                "callback_query": {
                    "id": "inline-1",
                    "from": presser,
                    "chat_instance": "1",
                    "inline_message_id": "AAQ",
                    "data": "/approve 1",
                }
            }
        )
        carrier = {"message_id": 5, "date": 0, "chat": {"id": ANN, "type": "private"}}
        tg.inject(
            {
                "callback_query": {
                    "id": "game-1",
                    "from": presser,
                    "chat_instance": "1",
                    "message": carrier,
                    "game_short_name": "g",
                }
            }
        )
        after = str(tg.message("after"))
        await events.wait_for(after)
        answered = await in_thread(tg.wait_answered, 2)
    assert sorted(a["callback_query_id"] for a in answered) == ["game-1", "inline-1"]
    assert events.ids == [after]  # neither press was admitted; the poll went on
