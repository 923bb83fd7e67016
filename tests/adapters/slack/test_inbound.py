"""Socket Mode envelopes as InboundEvents: DMs, mentions, threads, the workspace as
scope, slash commands; bots, the bot itself, subtypes and a mention's twin skipped."""

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


def test_text_is_escaped_as_slack_shows_it():
    assert escape("a < b & c > d") == "a &lt; b &amp; c &gt; d"
