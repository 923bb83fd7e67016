"""Buttons on Slack: the Slack adapter in this process (tests/adapters/inprocess.py) against
the fake Slack, admitting into a real inbound journal (a state.db, no router: events wait
there). A send with buttons carries Block Kit blocks (the text in sections, the buttons
in one actions block); a press comes back as an `interactive` envelope and is admitted
as the button's command from the presser, then acknowledged; a redelivered press is
journaled once; other interactions are acknowledged and skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

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
from hermes.adapters.slack.adapter import SlackAdapter
from hermes.adapters.slack.blocks import sections_of
from hermes.adapters.slack.config import SlackConfig
from hermes.config import Secrets
from hermes.gateway.admission import Admission
from hermes.gateway.approvals import buttons
from hermes.state.registry import Registry
from tests import seed
from tests.adapters.inprocess import Running, running
from tests.adapters.serving import in_thread
from tests.adapters.slack.serving import APP_VAR, BOT_VAR
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, TEAM_ID, FakeSlack

APPROVAL = buttons("3f9a1c")  # the approval prompt's
THREAD = "1699999999.000100"  # the thread the turn is in (older than any fake ts)


class Journal:
    """The real admission (the inbound journal in `state_db`), recording for each event
    what admission said and the fake's keys of every acknowledgement it had received by
    the time admission answered."""

    def __init__(self, slack: FakeSlack, admission: Admission, state_db: Path) -> None:
        self.slack = slack
        self.admission = admission
        self.state_db = state_db
        self.seen: list[tuple[InboundEvent, bool, list[str]]] = []

    async def __call__(self, event: InboundEvent, cursor: Cursor | None = None) -> bool:
        added = await self.admission(event, cursor)
        self.seen.append((event, added, [a["event_id"] for a in self.slack.acks]))
        return added

    def rows(self) -> list[tuple[str, str, str]]:
        return seed.rows(self.state_db, "SELECT event_id, text, state FROM inbound_journal")


@asynccontextmanager
async def slack_adapter(
    slack: FakeSlack, registry: Registry, tmp_path: Path
) -> AsyncIterator[tuple[Running, Journal]]:
    """The adapter connected to the fake, admitting into a journal in tmp_path."""
    config = SlackConfig(token_env=BOT_VAR, app_token_env=APP_VAR, base_url=slack.url,
                         idle_timeout=3)  # fmt: skip
    secrets = Secrets({BOT_VAR: BOT_TOKEN, APP_VAR: APP_TOKEN}, frozenset())
    state_db = tmp_path / "state.db"
    async with Admission(registry, state_db, lambda: None, Clock()) as admission:
        journal = Journal(slack, admission, state_db)
        async with running(SlackAdapter, "slack", config, secrets, journal) as run:
            await in_thread(slack.wait_connections, 1)
            yield run, journal


async def prompt(run: Running, slack: FakeSlack, chat: str = "C5") -> dict[str, Any]:
    """An approval prompt with its buttons sent in `chat` (in THREAD); its record in `sent`."""
    thread = None if chat.startswith("D") else THREAD
    target = Target("slack", chat, thread, TEAM_ID)
    result = await run.send(SendRequest(target, "Run `sudo ls`?", f"k-{chat}", buttons=APPROVAL))
    assert isinstance(result, Sent)
    [sent] = [s for s in slack.sent if s["ts"] == result.message_id]
    return sent


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(i: int, label: str, command: str) -> dict[str, Any]:
    return {"type": "button", "action_id": f"hermes_{i}",
            "text": {"type": "plain_text", "text": label}, "value": command}  # fmt: skip


@pytest.mark.timeout(60)
async def test_a_send_with_buttons_shows_the_text_and_the_buttons(slack, registry, tmp_path):
    async with slack_adapter(slack, registry, tmp_path) as (run, _):
        target = Target("slack", "C5", THREAD, TEAM_ID)
        text = "Run `sudo ls` in /srv? <b> & more"
        result = await run.send(SendRequest(target, text, "k1", buttons=APPROVAL))
        long = "x" * 2998 + "<" + "y" * 4000  # its escaped `<` falls across the 3,000 cut
        too_long = Button("Broken", "/approve " + "x" * 2000)  # a value Slack refuses
        plain = SendRequest(target, long, "k2", plain=True, buttons=(too_long, APPROVAL[2]))
        assert isinstance(await run.send(plain), Sent)  # the plain resend keeps its buttons
        assert isinstance(await run.send(SendRequest(target, "no buttons", "k3")), Sent)
    first, second, third = slack.sent
    assert result == Sent(first["ts"])
    escaped = "Run `sudo ls` in /srv? &lt;b&gt; &amp; more"
    assert (first["channel"], first["thread_ts"], first["text"]) == ("C5", THREAD, escaped)
    assert first["blocks"] == [section(escaped), {"type": "actions", "elements": [
        button(0, "Approve", "/approve 3f9a1c"),
        button(1, "Always for this session", "/approve 3f9a1c always"),
        button(2, "Deny", "/deny 3f9a1c"),
    ]}]  # fmt: skip
    *sections, actions = second["blocks"]
    assert [s["text"]["text"] for s in sections] == [
        "x" * 2998, "&lt;" + "y" * 2996, "y" * 1004,
    ]  # fmt: skip
    assert second["text"] == "x" * 2998 + "&lt;" + "y" * 4000  # the notification's, whole
    assert actions == {"type": "actions", "elements": [button(0, "Deny", "/deny 3f9a1c")]}
    assert "blocks" not in third
    assert slack.refused == []


def test_a_long_text_is_cut_into_sections_at_line_breaks():
    text = "\n".join(f"line {i:04d} " + "z" * 90 for i in range(100))  # 100 lines of 100
    pieces = sections_of(text)
    assert all(len(p) <= 3000 for p in pieces) and len(pieces) == 4
    assert "\n".join(pieces) == text  # cut only at line breaks, each taken out
    assert all(p.startswith("line ") for p in pieces)
    assert sections_of("a" * 3000) == ["a" * 3000] and sections_of(" \n ") == []


@pytest.mark.timeout(60)
async def test_a_press_is_admitted_as_its_command_and_then_acknowledged(slack, registry, tmp_path):
    async with slack_adapter(slack, registry, tmp_path) as (run, journal):
        sent = await prompt(run, slack)
        pressed = slack.press(sent, "Approve", user="U2")
        await in_thread(slack.wait_acked, pressed)
    action_ts = slack.payload(pressed)["actions"][0]["action_ts"]
    [(event, added, acks_by_then)] = journal.seen
    assert event == InboundEvent(
        platform="slack",
        event_id=f"action-{action_ts}-U2",
        chat_type=ChatType.CHANNEL,
        chat_id="C5",
        user_id="U2",
        text="/approve 3f9a1c",
        scope_id=TEAM_ID,
        thread_id=THREAD,
        user_name="u2",
        message_id=sent["ts"],
        mentioned=True,
    )
    assert added and acks_by_then == []  # committed before the ack went out
    assert [a["event_id"] for a in slack.acks] == [pressed]
    assert journal.rows() == [(event.event_id, "/approve 3f9a1c", "admitted")]


@pytest.mark.timeout(60)
async def test_a_redelivered_press_is_admitted_once(slack, registry, tmp_path):
    async with slack_adapter(slack, registry, tmp_path) as (run, journal):
        sent = await prompt(run, slack, "D7")
        pressed = slack.press(sent, "/deny 3f9a1c", user="U2")
        await in_thread(slack.wait_acked, pressed)
        slack.redeliver(pressed)  # the same press in a new envelope
        await in_thread(lambda: slack.wait_acks(2, event_id=pressed))
    (first, added, acks), (again, added_again, acks_again) = journal.seen
    assert first == again and (first.chat_type, first.thread_id) == (ChatType.DM, None)
    assert (added, added_again) == (True, False)  # the journal knew it by its key
    assert (acks, acks_again) == ([], [pressed])  # each acknowledged after its admission
    assert journal.rows() == [(first.event_id, "/deny 3f9a1c", "admitted")]


@pytest.mark.timeout(60)
async def test_other_interactions_are_acknowledged_and_skipped(slack, registry, tmp_path):
    async with slack_adapter(slack, registry, tmp_path) as (run, journal):
        sent = await prompt(run, slack)
        view = slack.envelope("interactive", {
            "type": "view_submission", "trigger_id": "tv1", "team": {"id": TEAM_ID},
            "user": {"id": "U2"}, "view": {"id": "V1", "state": {"values": {}}},
        })  # fmt: skip
        menu = slack.envelope("interactive", {  # a menu's choice: no value to take
            "type": "block_actions", "trigger_id": "tv2", "team": {"id": TEAM_ID},
            "user": {"id": "U2"}, "channel": {"id": "C5"},
            "container": {"type": "message", "message_ts": sent["ts"], "channel_id": "C5"},
            "actions": [{"type": "static_select", "action_id": "m", "block_id": "b",
                         "action_ts": "1.1", "selected_option": {"value": "v"}}],
        })  # fmt: skip
        said = slack.message("and now a message", channel="D7")
        await in_thread(slack.wait_acked, said)
    assert slack.acked == [view, menu, said]  # in the order they came
    assert [e.event_id for e, _, _ in journal.seen] == [said]
