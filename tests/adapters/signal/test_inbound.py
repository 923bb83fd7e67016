"""What hermes takes from signal-cli's `receive` envelopes, and how an answer's Markdown
becomes Signal's text styles."""

from __future__ import annotations

import json

import pytest

from hermes.adapters.signal.inbound import read_envelope
from hermes.adapters.signal.styles import styled

ACCOUNT = "+15550000001"
ANN = "+15550000002"
GROUP = "aGVybWVzIGdyb3VwIGlkIGZvciB0ZXN0cyAxMjM0NTY="


def envelope(data=None, source=ANN, timestamp=1700000000000, **more):
    found = {"source": source, "sourceNumber": source, "sourceUuid": "uuid-ann",
             "sourceName": "Ann", "sourceDevice": 1, "timestamp": timestamp, **more}  # fmt: skip
    if data is not None:
        found["dataMessage"] = {"timestamp": timestamp, **data}
    return {"envelope": found, "account": ACCOUNT}


def read(params):
    found = read_envelope(params, ACCOUNT, "signal")
    return None if found is None else found.event


def test_a_direct_message_is_taken_by_sender_and_timestamp():
    event = read(envelope({"message": "hello"}))
    assert (event.event_id, event.chat_id, event.user_id) == (f"{ANN}:1700000000000", ANN, ANN)
    assert event.chat_type == "dm" and event.mentioned and event.text == "hello"
    assert event.message_id == f"1700000000000:{ANN}" and event.user_name == "Ann"


def test_in_a_group_a_mention_or_a_quote_of_hermes_addresses_it():
    group = {"groupInfo": {"groupId": GROUP, "type": "DELIVER"}}
    chatter = read(envelope({"message": "lunch?", **group}))
    assert chatter.chat_id == GROUP and chatter.chat_type == "group" and not chatter.mentioned
    mention = {"number": ACCOUNT, "name": "hermes", "start": 4, "length": 1}
    asked = read(envelope({"message": "hey \ufffc, time?", "mentions": [mention], **group}))
    assert asked.mentioned and asked.text == "hey @hermes, time?"
    other = {"number": ANN, "name": ANN, "start": 0, "length": 1}
    named = read(envelope({"message": "\ufffc said so", "mentions": [other], **group}))
    assert named.text == "@someone said so" and not named.mentioned  # no number to the model
    quote = {"id": 1699999999000, "author": ACCOUNT, "authorNumber": ACCOUNT, "text": "noon"}
    replied = read(envelope({"message": "thanks", "quote": quote, **group}))
    assert replied.mentioned and replied.reply_to == f"1699999999000:{ACCOUNT}"


def test_a_mention_after_an_emoji_is_placed_by_utf16_units():
    mention = {"number": ACCOUNT, "name": ACCOUNT, "start": 3, "length": 1}
    event = read(envelope({"message": "😀 \ufffc!", "mentions": [mention]}))
    assert event.text == "😀 @hermes!"


@pytest.mark.parametrize("params", [
    envelope({"message": "👍", "reaction": {"emoji": "👍", "targetSentTimestamp": 1}}),
    envelope(receiptMessage={"type": "DELIVERY", "timestamps": [1]}),
    envelope(typingMessage={"action": "STARTED"}),
    envelope(editMessage={"targetSentTimestamp": 1, "dataMessage": {"message": "edited"}}),
    envelope(syncMessage={"sentMessage": {"destination": ANN, "message": "mine"}},
             source=ACCOUNT),
    envelope({"message": "from myself"}, source=ACCOUNT),
    envelope({"message": "   "}),
    envelope({"message": "x", "groupInfo": {"groupId": GROUP, "type": "UPDATE"}}),
    envelope({"message": "no timestamp"}, timestamp=None),
    {"envelope": "not an object"},
    "not even a dict",
])  # fmt: skip
def test_what_is_not_a_users_words_is_not_taken(params):
    assert read(params) is None


def test_attachments_are_references_read_only_later():
    attachment = {"id": "abc123", "contentType": "image/png", "filename": "cat.png",
                  "size": 1234}  # fmt: skip
    event = read(envelope({"message": "", "attachments": [attachment]}))
    [ref] = event.attachments
    assert json.loads(ref) == {"id": "abc123", "recipient": ANN, "name": "cat.png",
                               "size": 1234, "contentType": "image/png"}  # fmt: skip


def test_markdown_becomes_text_styles_in_utf16_units():
    text, styles = styled("😀 **bold**, *it*, `mono` and ~~gone~~")
    assert text == "😀 bold, it, mono and gone"
    assert styles == ["3:4:BOLD", "9:2:ITALIC", "13:4:MONOSPACE", "22:4:STRIKETHROUGH"]


def test_blocks_read_the_same_as_plain_text():
    text, styles = styled("# Plan\n\n- one\n- two\n\n```\nx = 1\n```")
    assert text == "Plan\n\n• one\n• two\n\nx = 1"
    assert styles == ["0:4:BOLD", "19:5:MONOSPACE"]
