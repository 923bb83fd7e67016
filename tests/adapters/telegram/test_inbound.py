"""Telegram updates as InboundEvents: chat kinds, forum topics, captions, mentions by
@username (UTF-16 offsets), /command@bot and reply-to-bot; edits skipped, other bots marked; a
button press (callback_query) as its command, or None where it has no command or chat."""

from __future__ import annotations

from hermes.adapters.contract import ChatType
from hermes.adapters.telegram.inbound import Bot, incoming, pressed

BOT = Bot(99, "hermes_bot")


def update(text="hi", chat_type="private", **message):
    chat = {"id": message.pop("chat_id", 5), "type": chat_type, **message.pop("chat", {})}
    sender = {"id": 7, "is_bot": False, "username": "ann", **message.pop("sender", {})}
    return {"update_id": 11, "message": {"message_id": 3, "chat": chat, "from": sender,
                                         "text": text, **message}}  # fmt: skip


def mention(text: str, handle: str, kind: str = "mention") -> list[dict]:
    start = text.index(handle)
    offset = len(text[:start].encode("utf-16-le")) // 2
    return [{"type": kind, "offset": offset, "length": len(handle.encode("utf-16-le")) // 2}]


def test_a_private_message_is_a_dm_addressed_to_us():
    event = incoming(update(), BOT).event
    assert (event.event_id, event.chat_type, event.chat_id, event.user_id) == (
        "11",
        ChatType.DM,
        "5",
        "7",
    )
    assert event.mentioned and event.message_id == "3" and event.user_name == "ann"


def test_a_mention_after_emoji_is_found_by_utf16_offsets():
    text = "😀😀 @hermes_bot what now?"
    event = incoming(update(text, "supergroup", entities=mention(text, "@hermes_bot")), BOT).event
    assert event.chat_type is ChatType.GROUP and event.mentioned
    other = "😀😀 @someone_else what now?"
    assert not incoming(update(other, "group", entities=mention(other, "@someone_else")),
                        BOT).event.mentioned  # fmt: skip


def test_a_command_to_us_and_a_reply_to_us_count_as_mentions():
    text = "/new@hermes_bot"
    cmd = update(text, "group", entities=mention(text, text, "bot_command"))
    assert incoming(cmd, BOT).event.mentioned
    reply = update("yes", "group", reply_to_message={"message_id": 40, "from": {"id": 99}})
    event = incoming(reply, BOT).event
    assert event.mentioned and event.reply_to == "40"


def test_a_forum_topic_is_a_thread_and_a_reply_chain_is_not():
    topic = update("x", "supergroup", chat={"is_forum": True}, message_thread_id=77,
                   is_topic_message=True)  # fmt: skip
    assert incoming(topic, BOT).event.thread_id == "77"
    chain = update("x", "supergroup", message_thread_id=77)
    assert incoming(chain, BOT).event.thread_id is None


def test_a_caption_is_the_text_and_media_are_listed():
    photo = update(None, photo=[{"file_id": "small", "file_size": 10},
                                {"file_id": "big", "file_unique_id": "u1", "file_size": 99}],
                   caption="look")  # fmt: skip
    found = incoming(photo, BOT)
    assert found.event.text == "look"
    assert [(m.file_id, m.unique_id, m.suffix) for m in found.media] == [("big", "u1", ".jpg")]


def test_another_bots_message_goes_in_marked_and_the_bots_own_is_skipped():
    other = incoming(update(sender={"id": 55, "is_bot": True}), BOT).event
    assert other.is_bot and other.user_id == "55"
    assert incoming(update(sender={"id": BOT.id, "is_bot": True}), BOT) is None


def test_a_reply_to_the_bots_own_message_is_replied():
    replying = update("yes", "supergroup", reply_to_message={"message_id": 3, "from": {"id": 99}})
    assert incoming(replying, BOT).event.replied
    elsewhere = update("yes", "supergroup", reply_to_message={"message_id": 3, "from": {"id": 8}})
    assert not incoming(elsewhere, BOT).event.replied


def test_edits_channels_and_empty_messages_are_skipped():
    assert incoming({"update_id": 1, "edited_message": {}}, BOT) is None
    assert incoming(update(chat_type="channel"), BOT) is None
    assert incoming(update(None), BOT) is None


def test_a_reply_in_a_forums_general_topic_is_not_a_thread():
    general = update("x", "supergroup", chat={"is_forum": True}, message_thread_id=12)
    assert incoming(general, BOT).event.thread_id is None


def query(data="/deny 3f9a1c", **message):
    carrier = update("Run it?", **message)["message"]
    return {"id": "q9", "from": {"id": 8, "first_name": "Bo"}, "chat_instance": "1",
            "message": carrier, "data": data}  # fmt: skip


def test_a_press_is_its_command_in_the_topic_of_the_message_carrying_it():
    event = pressed(query(chat_type="supergroup", chat={"is_forum": True},
                          message_thread_id=77, is_topic_message=True))  # fmt: skip
    assert (event.event_id, event.chat_type, event.chat_id, event.thread_id) == (
        "cb-q9", ChatType.GROUP, "5", "77",
    )  # fmt: skip
    assert (event.user_id, event.user_name, event.text) == ("8", "Bo", "/deny 3f9a1c")
    assert event.mentioned and event.message_id == event.reply_to == "3"
    assert pressed(query()).chat_type is ChatType.DM


def test_a_press_without_a_command_or_a_chat_is_none():
    assert pressed(query(data=None)) is None  # a game's button
    assert pressed({**query(), "message": None, "inline_message_id": "AAQ"}) is None
    assert pressed(query(chat_type="channel")) is None
