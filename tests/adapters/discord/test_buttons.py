"""Buttons on Discord, in this process against the fake Discord: a send's buttons go out as
one action row of components (the plain resend too; a button that does not fit is left
off, the message still goes), and a press comes back as an INTERACTION_CREATE that is
admitted as the button's command from the presser, in the chat of the message, and only
then acknowledged (type 6) within Discord's 3 seconds; a press delivered twice is
admitted once and acknowledged both times."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from hermes.actors.clock import Clock
from hermes.adapters.contract import (
    Button,
    ChatType,
    Cursor,
    InboundEvent,
    SendRequest,
    Sent,
    Target,
)
from hermes.adapters.discord.components import button_row
from hermes.gateway.admission import Admission
from hermes.gateway.approvals import buttons
from hermes.state.registry import Registry
from tests import seed
from tests.adapters.discord.inprocess import NAME, running_discord
from tests.adapters.inprocess import Admissions
from tests.adapters.serving import in_thread
from tests.fakes.discord import FakeDiscord

APPROVAL = buttons("3f9a1c")  # the approval prompt's
ROW = [{"type": 1, "components": [
    {"type": 2, "style": 1, "label": "Approve", "custom_id": "/approve 3f9a1c"},
    {"type": 2, "style": 2, "label": "Always for this session",
     "custom_id": "/approve 3f9a1c always"},
    {"type": 2, "style": 4, "label": "Deny", "custom_id": "/deny 3f9a1c"},
]}]  # fmt: skip
GUILD, CHANNEL, DM = "500", "3001", "2001"


@pytest.fixture
def discord():
    with FakeDiscord(heartbeat_interval=0.2) as fake:
        yield fake
        assert fake.internal_errors == []


class Journaled(Admission):
    """The gateway's admission into a real journal (no router runs), keeping what it
    answered for each event."""

    def __init__(self, registry: Registry, state_db: Path) -> None:
        super().__init__(registry, state_db, lambda: None, Clock())
        self.outcomes: list[tuple[str, bool]] = []
        self._changed = trio.Event()

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        admitted = await super().__call__(event, cursor)
        self.outcomes.append((event.event_id, admitted))
        self._changed.set()
        self._changed = trio.Event()
        return admitted

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(10):
            while len(self.outcomes) < count:
                await self._changed.wait()


def request(chat: str, *buttons: Button, plain: bool = False, key: str = "k") -> SendRequest:
    scope = None if chat == DM else GUILD
    target = Target(NAME, chat, None, scope)
    return SendRequest(target, "run `sudo apt upgrade`?", key, plain=plain, buttons=buttons)


def test_the_row_styles_and_what_does_not_fit():
    assert button_row(APPROVAL) == (ROW, [])
    assert button_row(()) == ([], [])
    deny_first, _ = button_row((Button("No", "/deny 1"), Button("Yes", "/approve 1")))
    assert [b["style"] for b in deny_first[0]["components"]] == [4, 2]  # the first is "No"
    misfits = (
        Button("Long", "/approve " + "x" * 92),  # 101 characters
        Button("x" * 81, "/approve 2"),
        Button("", "/approve 3"),
        Button("Empty", ""),
        Button("Again", "/approve 3f9a1c"),
    )
    components, left_off = button_row((APPROVAL[0], *misfits, *APPROVAL[1:]))
    assert components == ROW and len(left_off) == len(misfits)
    assert "100" in left_off[0] and "80" in left_off[1] and "same command" in left_off[4]
    seven = tuple(Button(f"B{i}", f"/b {i}") for i in range(7))
    components, left_off = button_row(seven)
    assert [b["label"] for b in components[0]["components"]] == ["B0", "B1", "B2", "B3", "B4"]
    assert len(left_off) == 2 and all("5 buttons" in line for line in left_off)


@pytest.mark.timeout(60)
async def test_a_send_with_buttons_carries_them_as_components(discord, caplog):
    caplog.set_level(logging.WARNING, logger="hermes.adapters")
    async with running_discord(discord, Admissions()) as run:
        await in_thread(discord.wait_settled)
        first = await run.send(request(CHANNEL, *APPROVAL))
        plain = await run.send(request(DM, *APPROVAL, plain=True, key="k2"))
        too_long = Button("Approve", "/approve " + "x" * 92)
        trimmed = await run.send(request(CHANNEL, too_long, APPROVAL[2], key="k3"))
        none_fit = await run.send(request(CHANNEL, too_long, key="k4"))
        bare = await run.send(request(CHANNEL, key="k5"))
    assert all(isinstance(r, Sent) for r in (first, plain, trimmed, none_fit, bare))
    one, two, three, four, five = discord.sent
    assert one["components"] == ROW and two["components"] == ROW  # the plain resend too
    assert (one["channel_id"], two["channel_id"]) == (CHANNEL, DM)
    assert three["components"] == [{"type": 1, "components": [
        {"type": 2, "style": 4, "label": "Deny", "custom_id": "/deny 3f9a1c"},
    ]}]  # fmt: skip
    assert "components" not in four and "components" not in five
    assert four["content"] == "run `sudo apt upgrade`?"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warned if "left off" in w]) == 2 and discord.refused == []


@pytest.mark.timeout(60)
async def test_a_press_is_admitted_as_its_command_then_acknowledged(discord):
    admissions = Admissions()
    async with running_discord(discord, admissions) as run:
        await in_thread(discord.wait_settled)
        typed = discord.message("hi", guild_id=GUILD, channel_id=CHANNEL, mentions_bot=True)
        await admissions.wait_for(typed)
        result = await run.send(request(CHANNEL, *APPROVAL))
        assert isinstance(result, Sent)
        admissions.hold("/approve 3f9a1c always")  # the journal takes its time
        press = discord.press(result.message_id, "Always for this session", user_id="42",
                              user_name="ann")  # fmt: skip
        await admissions.wait_for(f"interaction-{press}")
        beats = len(discord.heartbeats)
        await in_thread(discord.wait_heartbeats, beats + 2)  # time passes, still held
        assert discord.callbacks == []  # not acknowledged before it is admitted
        admissions.release("/approve 3f9a1c always")
        [ack] = await in_thread(discord.wait_callbacks, 1)
        # a DM: the presser is the interaction's `user`
        dm_typed = discord.message("hello", author_id="42")
        await admissions.wait_for(dm_typed)
        dm_sent = await run.send(request(DM, *APPROVAL, key="k2"))
        assert isinstance(dm_sent, Sent)
        dm_press = discord.press(dm_sent.message_id, "/deny 3f9a1c", user_id="42")
        await in_thread(discord.wait_callbacks, 2)
    assert (ack["interaction_id"], ack["type"], ack["status"]) == (press, 6, 204)
    assert ack["in_time"] and ack["after"] < 3.0 and ack["authorization"] is False
    event = admissions.event(f"interaction-{press}")
    assert (event.text, event.user_id, event.user_name) == ("/approve 3f9a1c always", "42", "ann")
    assert event.mentioned and event.message_id == event.reply_to == result.message_id
    message = admissions.event(typed)  # where a typed message in that chat is
    where = (event.chat_type, event.chat_id, event.thread_id, event.scope_id)
    assert where == (message.chat_type, message.chat_id, message.thread_id, message.scope_id)
    assert where == (ChatType.GROUP, CHANNEL, None, GUILD)
    dm = admissions.event(f"interaction-{dm_press}")
    assert (dm.chat_type, dm.chat_id, dm.scope_id, dm.user_id) == (ChatType.DM, DM, None, "42")
    assert (dm.text, dm.message_id) == ("/deny 3f9a1c", dm_sent.message_id)
    assert [(c["type"], c["status"], c["in_time"]) for c in discord.callbacks] == [
        (6, 204, True), (6, 204, True),
    ]  # fmt: skip


@pytest.mark.timeout(60)
async def test_a_press_delivered_twice_is_admitted_once_and_acknowledged_both_times(
    discord, registry, tmp_path
):
    state_db = tmp_path / "state.db"
    journal = Journaled(registry, state_db)
    async with running_discord(discord, journal) as run:
        await in_thread(discord.wait_settled)
        result = await run.send(request(DM, *APPROVAL))
        assert isinstance(result, Sent)
        press = discord.press(result.message_id, "Approve")
        await journal.wait_for(1)
        await in_thread(discord.wait_callbacks, 1)
        discord.redeliver(press)  # as a Resume from before it would replay it
        await journal.wait_for(2)
        await in_thread(discord.wait_callbacks, 2)
        assert run.restarts == 0
    key = f"interaction-{press}"
    assert journal.outcomes == [(key, True), (key, False)]
    journaled = seed.rows(state_db, "SELECT event_id, text FROM inbound_journal")
    assert journaled == [(key, "/approve 3f9a1c")]
    first, second = discord.callbacks
    assert (first["type"], first["status"], first["in_time"]) == (6, 204, True)
    assert (second["type"], second["status"], second["code"]) == (6, 400, 40060)


@pytest.mark.timeout(60)
async def test_a_press_without_a_command_is_acknowledged_and_skipped_a_slash_command_answered(
    discord,
):
    admissions = Admissions()
    async with running_discord(discord, admissions):
        await in_thread(discord.wait_settled)
        user = {"id": "42", "username": "ann"}
        base = {"application_id": "1", "channel_id": DM, "user": user, "version": 1}
        # the fake answers these 10062: it knows only the presses it made itself
        discord.dispatch("INTERACTION_CREATE", {**base, "id": "901", "token": "t1", "type": 3,
                                                "data": {"component_type": 2}})  # fmt: skip
        discord.dispatch("INTERACTION_CREATE", {**base, "id": "902", "token": "t2", "type": 2,
                                                "data": {"name": "ask"}})  # fmt: skip
        discord.dispatch("INTERACTION_CREATE", {**base, "id": "903", "token": "t3", "type": 4})
        after = discord.message("after them")
        await admissions.wait_for(after)
        await in_thread(discord.wait_callbacks, 2)
    assert admissions.ids == [after]  # neither interaction was admitted
    # each answered on its own, in whichever order they land
    answered = {c["interaction_id"]: c for c in discord.callbacks}
    assert len(discord.callbacks) == 2 and answered.keys() == {"901", "902"}  # not 903's
    assert answered["901"]["type"] == 6  # the press: acknowledged, nothing more
    command = answered["902"]
    assert command["type"] == 4
    assert command["data"]["flags"] == 64 and "messages" in command["data"]["content"]
