"""MESSAGE_CREATE as InboundEvents: DMs always ours, guild mentions and replies to the
bot, the guild as scope, bots (this one included) skipped. A button press as the event of
its command, placed where a message in its channel is."""

from __future__ import annotations

from hermes.adapters.contract import ChatType
from hermes.adapters.discord.inbound import incoming, pressed

BOT = "900"


def message(content="hi", **fields):
    return {"id": "11", "channel_id": "C1", "content": content,
            "author": {"id": "7", "username": "ann"}, **fields}  # fmt: skip


def test_a_dm_is_ours():
    event = incoming(message(), BOT)
    assert (event.chat_type, event.chat_id, event.event_id, event.scope_id) == (
        ChatType.DM,
        "C1",
        "11",
        None,
    )
    assert event.mentioned


def test_in_a_guild_a_mention_or_a_reply_to_the_bot_is_ours():
    plain = incoming(message("hello all", guild_id="G1"), BOT)
    assert plain.chat_type is ChatType.GROUP and not plain.mentioned and plain.scope_id == "G1"
    mention = incoming(message(f"<@!{BOT}> help", guild_id="G1", mentions=[{"id": BOT}]), BOT)
    assert mention.mentioned and mention.text == "help"
    reply = incoming(message("yes", guild_id="G1", message_reference={"message_id": "5"},
                             referenced_message={"author": {"id": BOT}}), BOT)  # fmt: skip
    assert reply.mentioned and reply.reply_to == "5"


def test_bots_are_skipped():
    assert incoming(message(author={"id": "8", "bot": True}), BOT) is None
    assert incoming(message(author={"id": BOT}), BOT) is None


def press(**fields):
    return {"id": "77", "type": 3, "token": "tok", "channel_id": "C1",
            "data": {"custom_id": "/approve 3f9a1c", "component_type": 2},
            "message": {"id": "55", "channel_id": "C1"}, **fields}  # fmt: skip


def test_a_press_is_its_command_from_the_presser_in_the_chat_of_its_message():
    member = {"user": {"id": "7", "username": "ann"}, "roles": []}
    in_guild = pressed(press(guild_id="G1", member=member))
    typed = incoming(message(guild_id="G1"), BOT)
    assert (in_guild.chat_type, in_guild.chat_id, in_guild.scope_id, in_guild.thread_id) == (
        typed.chat_type, typed.chat_id, typed.scope_id, typed.thread_id,
    )  # fmt: skip
    assert (in_guild.text, in_guild.user_id, in_guild.user_name) == ("/approve 3f9a1c", "7", "ann")
    assert in_guild.event_id == "interaction-77"  # never a message's id
    assert in_guild.message_id == in_guild.reply_to == "55"  # the message with the button
    assert in_guild.mentioned and in_guild.platform == "discord"
    in_dm = pressed(press(user={"id": "8", "username": "bob"}))
    assert (in_dm.chat_type, in_dm.scope_id, in_dm.user_id) == (ChatType.DM, None, "8")


def test_a_press_without_a_command_a_presser_or_a_chat_is_none():
    user = {"id": "8"}
    assert pressed(press(user=user, data={"component_type": 2})) is None
    assert pressed(press()) is None
    assert pressed(press(user=user, channel_id=None)) is None
    assert pressed(press(user=user, channel_id=None, channel={"id": "C2"})).chat_id == "C2"
