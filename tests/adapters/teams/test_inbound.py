"""Activities as events: where a message is from, whether it names the bot (and without
the mention), a press's command, and what is not taken."""

from __future__ import annotations

from hermes.adapters.contract import ChatType
from hermes.adapters.teams.inbound import event_of
from tests.fakes.teams import BOT_ID, CHANNEL, GROUP


def activity(text: str, kind: str = "groupChat", conversation: str = GROUP, **more) -> dict:
    return {"type": "message", "id": "1700", "text": text, "channelId": "msteams",
            "from": {"id": "29:ann", "name": "Ann"}, "recipient": {"id": BOT_ID},
            "conversation": {"id": conversation, "conversationType": kind},
            "channelData": {"tenant": {"id": "t1"}}, **more}  # fmt: skip


def mention(name: str = "hermes", bot: str = BOT_ID) -> list[dict]:
    return [{"type": "mention", "text": f"<at>{name}</at>", "mentioned": {"id": bot}}]


def test_a_group_chat_message_names_the_bot_only_by_its_mention_entity():
    named = event_of(activity("<at>hermes</at> hi <at>Bob</at>", entities=mention()), "teams")
    assert named is not None and named.mentioned and named.text == "hi <at>Bob</at>"
    assert (named.chat_type, named.chat_id, named.scope_id) == (ChatType.GROUP, GROUP, "t1")
    other = event_of(activity("<at>Bob</at> hi", entities=mention("Bob", "29:bob")), "teams")
    assert other is not None and not other.mentioned and other.text == "<at>Bob</at> hi"


def test_a_channel_reply_is_in_its_roots_thread_and_ids_are_per_conversation():
    reply = activity("more", "channel", f"{CHANNEL};messageid=1600")
    event = event_of(reply, "teams")
    assert event is not None and (event.chat_id, event.thread_id) == (CHANNEL, "1600")
    assert event.event_id == f"{CHANNEL};messageid=1600/1700"
    assert event.chat_type is ChatType.CHANNEL and not event.mentioned


def test_a_press_is_its_command_and_what_is_no_message_is_not_taken():
    press = event_of(activity("", "personal", "a:29:ann", value={"hermes": "/approve a1"}),
                     "teams")  # fmt: skip
    assert press is not None and (press.text, press.mentioned) == ("/approve a1", True)
    assert event_of(activity("", value={"hermes": "rm -rf /"}), "teams") is None  # no command
    assert event_of(activity("   "), "teams") is None
    assert event_of({**activity("hi"), "from": None}, "teams") is None
    bot = event_of({**activity("hi"), "from": {"id": "28:other-bot"}}, "teams")
    assert bot is not None and bot.is_bot
