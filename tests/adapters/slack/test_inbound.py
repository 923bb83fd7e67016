"""Socket Mode envelopes as InboundEvents: DMs, mentions, threads, the workspace as
scope, slash commands, button presses; bots, the bot itself, subtypes, a mention's twin
and other interactions skipped."""

from __future__ import annotations

from hermes.adapters.contract import ChatType
from hermes.adapters.slack.inbound import incoming
from hermes.adapters.slack.mrkdwn import escape

BOT = "UBOT"


def envelope(event: dict, kind: str = "events_api") -> dict:
    payload = {"team_id": "T1", "event_id": "Ev1", "type": "event_callback", "event": event}
    return {"envelope_id": "e1", "type": kind, "payload": payload}


def test_a_dm_is_ours_and_keyed_by_its_workspace():
    event = incoming(envelope({"type": "message", "channel_type": "im", "channel": "D1",
                               "user": "U1", "text": "hi", "ts": "1.1"}), BOT)  # fmt: skip
    assert (event.chat_type, event.chat_id, event.scope_id, event.event_id) == (
        ChatType.DM,
        "D1",
        "T1",
        "Ev1",
    )
    assert event.mentioned and event.message_id == "1.1" and event.thread_id is None


def test_a_mention_in_a_thread_loses_the_mention_and_keeps_the_thread():
    event = incoming(envelope({"type": "app_mention", "channel": "C1", "user": "U1",
                               "text": "<@UBOT> /new", "ts": "2.2", "thread_ts": "1.0"}),
                     BOT)  # fmt: skip
    assert (event.chat_type, event.text, event.thread_id) == (ChatType.CHANNEL, "/new", "1.0")
    assert event.mentioned


def test_twins_bots_and_subtypes_are_skipped():
    twin = {"type": "message", "channel_type": "channel", "channel": "C1", "user": "U1",
            "text": "<@UBOT> hi", "ts": "3.3"}  # fmt: skip
    assert incoming(envelope(twin), BOT) is None  # its app_mention is the one taken
    assert incoming(envelope({**twin, "text": "hi", "bot_id": "B9"}), BOT) is None
    assert incoming(envelope({**twin, "text": "hi", "user": BOT}), BOT) is None
    assert incoming(envelope({**twin, "text": "hi", "subtype": "message_changed"}), BOT) is None
    chatter = incoming(envelope({**twin, "text": "just talking"}), BOT)
    assert chatter is not None and not chatter.mentioned  # the router ignores it


def test_a_slash_command_is_the_routers_command():
    payload = {"command": "/hermes", "text": "status", "user_id": "U1", "channel_id": "C9",
               "team_id": "T1", "trigger_id": "tr1"}  # fmt: skip
    event = incoming({"envelope_id": "e2", "type": "slash_commands", "payload": payload}, BOT)
    assert (event.text, event.event_id, event.chat_id, event.scope_id) == (
        "/status",
        "slash-tr1",
        "C9",
        "T1",
    )


def press(channel: str, message: dict, **action: str) -> dict:
    """An `interactive` envelope: U2 pressed a button of `message` in `channel`."""
    payload = {
        "type": "block_actions", "trigger_id": "tr9", "team": {"id": "T1", "domain": "t"},
        "user": {"id": "U2", "username": "ana", "name": "ana", "team_id": "T1"},
        "channel": {"id": channel, "name": "general"}, "message": message,
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel},
        "actions": [{"action_id": "hermes_0", "block_id": "b1", "type": "button",
                     "value": "/approve 3f9a1c", "action_ts": "3.3", **action}],
    }  # fmt: skip
    return {"envelope_id": "e3", "type": "interactive", "payload": payload}


def test_a_press_is_its_command_from_the_presser_in_reply_to_its_message():
    event = incoming(press("C5", {"ts": "2.2", "thread_ts": "1.0", "text": "Run?"}), BOT)
    assert (event.text, event.user_id, event.user_name, event.mentioned) == (
        "/approve 3f9a1c",
        "U2",
        "ana",
        True,
    )
    assert (event.chat_type, event.chat_id, event.thread_id, event.scope_id) == (
        ChatType.CHANNEL,
        "C5",
        "1.0",
        "T1",
    )
    assert (event.message_id, event.event_id) == ("2.2", "action-3.3-U2")
    typed = incoming(envelope({"type": "app_mention", "channel": "C5", "user": "U2",
                               "text": "<@UBOT> hi", "ts": "4.4", "thread_ts": "1.0"}),
                     BOT)  # fmt: skip
    assert (event.target(), event.chat_type) == (typed.target(), typed.chat_type)  # one session


def test_a_press_in_a_dm_and_on_a_thread_starter_is_outside_any_thread():
    dm = incoming(press("D1", {"ts": "2.2", "text": "Run?"}), BOT)
    assert (dm.chat_type, dm.chat_id, dm.thread_id) == (ChatType.DM, "D1", None)
    starter = incoming(press("C5", {"ts": "2.2", "thread_ts": "2.2", "text": "Run?"}), BOT)
    assert (starter.chat_type, starter.thread_id, starter.message_id) == (
        ChatType.CHANNEL,
        None,
        "2.2",
    )


def test_other_interactions_and_a_press_without_a_command_are_skipped():
    no_value = press("C5", {"ts": "2.2"}, value="")
    assert incoming(no_value, BOT) is None
    modal = press("C5", {"ts": "2.2"})
    modal["payload"]["type"] = "view_submission"
    assert incoming(modal, BOT) is None
    nowhere = press("C5", {"ts": "2.2"})
    del nowhere["payload"]["channel"], nowhere["payload"]["container"]["channel_id"]
    assert incoming(nowhere, BOT) is None


def test_text_is_escaped_as_slack_shows_it():
    assert escape("a < b & c > d") == "a &lt; b &amp; c &gt; d"
