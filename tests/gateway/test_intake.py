"""Intake's one decision, row by row: every way an admitted event can go, and what its
sender is told on each (a notice, silence only where nobody should hear one, or the turn
that answers it)."""

from __future__ import annotations

import typing

import attrs
import pytest

from hermes.adapters.contract import ChatType, InboundEvent
from hermes.adapters.settings import GroupsConfig
from hermes.gateway.authorization import Decision
from hermes.gateway.intake import (
    DRAIN_NOTICE,
    Command,
    Limited,
    Merge,
    Queue,
    Refuse,
    Routing,
    Screening,
    Start,
    Steer,
    Way,
    addressed,
    dispatch,
    route,
    screen,
)

ALLOWED = Decision(allowed=True, reason="in allowed_users")
STRANGER_DM = Decision(allowed=False, reason="unknown user; pairing offered", offer_pairing=True)
STRANGER_GROUP = Decision(allowed=False, reason="unknown user in group", silent=True)
OFFER = "Hi! I don't know you yet: your pairing code is ABCD2345."
MENTION, ALWAYS, REPLY = GroupsConfig(), GroupsConfig("always"), GroupsConfig("reply")
BOTS = GroupsConfig(bots="answer", bot_turns=3)
LIMIT_NOTICE = "You are writing faster than I answer (20 messages a minute); ..."


def dm(text: str = "hello", **kw) -> InboundEvent:
    return InboundEvent("telegram", "1", ChatType.DM, "c", "u", text, **kw)


def group(text: str = "hello", **kw) -> InboundEvent:
    return InboundEvent("telegram", "1", ChatType.GROUP, "g", "u", text, **kw)


SCREENED = [
    # id, event, facts, (reason phrase, notice) or None (goes on)
    ("an allowed DM", dm(), Screening(ALLOWED, MENTION), None),
    ("a stranger's DM: the pairing offer", dm(), Screening(STRANGER_DM, MENTION, OFFER),
     ("pairing", OFFER)),
    ("a stranger in a group: silence", group(mentioned=True), Screening(STRANGER_GROUP, MENTION),
     ("unknown user", "")),
    ("group chatter, activation mention: silence", group(), Screening(ALLOWED, MENTION),
     ("not addressed", "")),
    ("a mention", group(mentioned=True), Screening(ALLOWED, MENTION), None),
    ("a reply to the bot", group(replied=True), Screening(ALLOWED, MENTION), None),
    ("a command in a group is addressed", group("/status"), Screening(ALLOWED, MENTION), None),
    ("activation always", group(), Screening(ALLOWED, ALWAYS), None),
    ("activation reply: a mention is not enough", group(mentioned=True),
     Screening(ALLOWED, REPLY), ("activation: reply", "")),
    ("activation reply: a reply", group(replied=True), Screening(ALLOWED, REPLY), None),
    ("another bot, bots ignored", group(is_bot=True, mentioned=True), Screening(ALLOWED, MENTION),
     ("a bot", "")),
    ("another bot, bots answered", group(is_bot=True, mentioned=True),
     Screening(ALLOWED, BOTS, bot_turns=2), None),
    ("another bot past bot_turns", group(is_bot=True, mentioned=True),
     Screening(ALLOWED, BOTS, bot_turns=3), ("3 bot turns in a row", "")),
    ("a bot in a DM, even answered in groups", dm(is_bot=True), Screening(ALLOWED, BOTS),
     ("a bot", "")),
    ("an allowed user while draining: the drain notice", dm(),
     Screening(ALLOWED, MENTION, draining=True), ("draining", DRAIN_NOTICE)),
    ("a stranger while draining: no drain notice", group(mentioned=True),
     Screening(STRANGER_GROUP, MENTION, draining=True), ("unknown user", "")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("event", "facts", "expected"), [pytest.param(*c[1:], id=c[0]) for c in SCREENED]
)
def test_screen(event, facts, expected):
    refused = screen(event, facts)
    if expected is None:
        assert refused is None
        return
    phrase, notice = expected
    assert isinstance(refused, Refuse)
    assert phrase in refused.reason and refused.notice == notice and not refused.answered


ROUTED = [
    # id, text, facts, what comes of it
    ("past the rate limit: its notice once", "hi", Routing(limited=LIMIT_NOTICE),
     Limited(LIMIT_NOTICE)),
    ("past the rate limit, told already: nothing", "hi", Routing(limited=""), Limited("")),
    ("a shared conversation's command: refused with the reason", "/new",
     Routing(in_shared="Only an owner can use /new here."),
     Refuse("a shared conversation's command", "Only an owner can use /new here.", True)),
    ("a router command", "/status", Routing(), Command("/status")),
    ("a router command is never merged", "/stop", Routing(merge_window=1.5), Command("/stop")),
    ("a session command waits for the turn", "/usage", Routing(running=True), Queue("/usage")),
    ("/queue TEXT queues once", "/queue and then this", Routing(running=True),
     Queue("and then this")),
    ("/steer TEXT steers once", "/steer use metric", Routing(running=True, busy="queue"),
     Steer("use metric")),
    ("/queue TEXT when idle: a turn that never interrupts", "/queue\nlater", Routing(),
     Queue("later")),
    ("/queue alone: its usage", "/queue", Routing(),
     Refuse("/queue without text", "Usage: /queue TEXT", True)),
    ("a message in a merge window: held for its burst", "part one", Routing(merge_window=1.5),
     Merge()),
    ("an unknown /word is a turn, never merged", "/deploy now", Routing(merge_window=1.5),
     Start("/deploy now")),
    ("merge_window 0: a turn at once", "hi", Routing(), Start("hi")),
    ("mid-turn, interrupt", "hi", Routing(running=True), Start("hi")),
    ("mid-turn, queue", "hi", Routing(running=True, busy="queue"), Queue("hi")),
    ("mid-turn, steer", "hi", Routing(running=True, busy="steer"), Steer("hi")),
    ("idle, steer: a turn", "hi", Routing(busy="steer"), Start("hi")),
]  # fmt: skip


@pytest.mark.parametrize(("text", "facts", "way"), [pytest.param(*c[1:], id=c[0]) for c in ROUTED])
def test_route(text, facts, way):
    assert route(dm(text), facts) == way


def test_every_way_is_in_the_tables():
    """A new way intake can decide is added to these tables, with what its sender hears."""
    ways = {type(w) for *_, w in ROUTED} | {Refuse}
    assert ways == set(typing.get_args(Way))


@pytest.mark.parametrize(
    ("running", "busy", "way"),
    [(False, "queue", Start), (True, "interrupt", Start), (True, "queue", Queue),
     (True, "steer", Steer)],
)  # fmt: skip
def test_a_burst_is_placed_by_the_session_state_when_its_window_passes(running, busy, way):
    assert dispatch("a\nb", running, busy) == way("a\nb")


def test_a_dm_is_always_addressed_and_a_command_of_ours_in_a_group_too():
    assert addressed(dm(), REPLY)
    assert addressed(group("/help"), REPLY)
    assert addressed(group("/help@hermes_bot", mentioned=True), REPLY)  # the adapter: ours
    assert not addressed(group("/help@other_bot"), MENTION)  # another bot's command
    assert not addressed(group("/giphy cats"), MENTION)  # not a command of ours
    assert not addressed(attrs.evolve(group(), mentioned=True), REPLY)
