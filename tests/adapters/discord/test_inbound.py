"""MESSAGE_CREATE as InboundEvents: DMs always ours, guild mentions and replies to the
bot, the guild as scope, bots (this one included) skipped."""

from __future__ import annotations

from hermes.adapters.contract import ChatType
from hermes.adapters.discord.inbound import incoming

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
