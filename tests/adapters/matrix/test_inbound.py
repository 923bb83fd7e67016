"""Matrix timeline events as InboundEvents: DMs and groups, each kind of mention (and
@room, which is none), threads and their falling-back replies, reply fallbacks stripped,
notices as bots, media as references (plain and encrypted) with their captions; hermes's
own events, edits, other event types and malformed events skipped, never a crash; long
text cut."""

from __future__ import annotations

import attrs
import pytest

from hermes.adapters.contract import ChatType
from hermes.adapters.matrix.inbound import MAX_TEXT, RoomView, read_event
from hermes.adapters.matrix.media import MediaRef

ME = "@hermes:example.org"
GROUP = RoomView(ME, "Hermes", direct=False, my_events=frozenset({"$mine"}))
ROOM = "!room:example.org"
ANN = "@ann:example.org"


def message(body="hi", msgtype="m.text", **content) -> dict:
    return {"type": "m.room.message", "event_id": "$ev", "sender": ANN,
            "content": {"msgtype": msgtype, "body": body, **content}}  # fmt: skip


def read(event, room=GROUP):
    return read_event(event, ROOM, room, "matrix")


def replying(to: str, **relation) -> dict:
    return {"m.relates_to": {"m.in_reply_to": {"event_id": to}, **relation}}


def in_thread(latest: str, falling_back: bool) -> dict:
    return replying(latest, rel_type="m.thread", event_id="$root", is_falling_back=falling_back)


def test_a_dm_is_addressed_to_hermes():
    event = read(message("hello there"), attrs.evolve(GROUP, direct=True))
    assert (event.platform, event.event_id, event.message_id) == ("matrix", "$ev", "$ev")
    assert (event.chat_type, event.chat_id, event.user_id) == (ChatType.DM, ROOM, ANN)
    assert (event.text, event.mentioned, event.is_bot) == ("hello there", True, False)
    assert (event.thread_id, event.reply_to, event.user_name) == (None,) * 3
    assert event.attachments == ()


@pytest.mark.parametrize(
    ("body", "content", "mentioned"),
    [
        ("what now?", {}, False),
        ("what now?", {"m.mentions": {"user_ids": [ME]}}, True),
        ("what now?", {"m.mentions": {"user_ids": ["@bob:example.org"]}}, False),
        (f"{ME}: what now?", {}, True),
        (f"{ME}: what now?", {"m.mentions": {}}, False),  # m.mentions says whom, only it
        ("hermes, what now?", {}, True),
        ("what now, HERMES?", {}, True),
        ("Hermesian thoughts", {}, False),  # the name inside another word
        ("what now?", replying("$mine"), True),
        ("what now?", replying("$someone-elses"), False),
        ("@room what now?", {"m.mentions": {"room": True}}, False),
        ("what now?", {"m.mentions": "not a dict"}, False),
    ],
)
def test_in_a_group_only_a_mention_of_hermes_or_a_reply_to_it_addresses_it(
    body, content, mentioned
):
    event = read(message(body, **content))
    assert event.chat_type is ChatType.GROUP and event.mentioned is mentioned


def test_without_a_display_name_only_the_user_id_mentions():
    nameless = attrs.evolve(GROUP, my_name=None)
    assert not read(message("hermes, what now?"), nameless).mentioned
    assert read(message(f"{ME} what now?"), nameless).mentioned


def test_a_thread_message_is_in_its_roots_thread_and_its_fallback_is_no_reply():
    event = read(message("more", **in_thread("$mine", falling_back=True)))
    assert (event.thread_id, event.reply_to) == ("$root", None)
    assert not event.mentioned  # the fallback names hermes's event; nobody replied to it
    referencing = message(**{"m.relates_to": {"rel_type": "m.reference", "event_id": "$a"}})
    assert read(referencing).thread_id is None  # only m.thread makes a thread


def test_a_real_reply_in_a_thread_keeps_both():
    event = read(message("yes", **in_thread("$mine", falling_back=False)))
    assert (event.thread_id, event.reply_to, event.mentioned) == ("$root", "$mine", True)


@pytest.mark.parametrize(
    ("body", "new_words"),
    [
        ("> <@bob:example.org> what time is it?\n> in Paris\n\nnoon", "noon"),
        ("> * <@bob:example.org> yawns\n\nme too\nand you?", "me too\nand you?"),
        ("> <@bob:example.org> what time is it?\nnoon", "noon"),  # no blank line after it
        ("> a quote of my own\n\nnoon", "> a quote of my own\n\nnoon"),  # not a fallback
    ],
)
def test_a_replys_fallback_is_stripped_to_the_new_words(body, new_words):
    event = read(message(body, **replying("$old")))
    assert (event.text, event.reply_to) == (new_words, "$old")


def test_a_fallback_is_kept_where_the_event_replies_to_nothing():
    body = "> <@bob:example.org> what time is it?\n\nnoon"
    assert read(message(body)).text == body


def test_a_fallback_quoting_hermes_does_not_mention_it():
    body = f"> <{ME}> an answer from long ago\n\nthanks"
    event = read(message(body, **replying("$old")))
    assert (event.text, event.mentioned) == ("thanks", False)


def test_a_notice_is_a_bots_message():
    assert read(message("build passed", "m.notice")).is_bot
    assert not read(message("* waves", "m.emote")).is_bot


def test_an_emote_keeps_its_body():
    assert read(message("waves", "m.emote")).text == "waves"


def test_hermess_own_events_and_edits_are_skipped():
    own = message()
    own["sender"] = ME
    assert read(own) is None
    replacing = {"rel_type": "m.replace", "event_id": "$a"}
    edit = message("* fixed", **{"m.new_content": {"msgtype": "m.text", "body": "fixed"},
                                 "m.relates_to": replacing})  # fmt: skip
    assert read(edit) is None


SEALED = {"url": "mxc://example.org/sealed", "key": {"k": "a-key"}, "iv": "an-iv",
          "hashes": {"sha256": "a-hash"}, "v": "v2"}  # fmt: skip


@pytest.mark.parametrize(
    ("msgtype", "content", "ref"),
    [
        ("m.image", {"url": "mxc://example.org/cat", "info": {"mimetype": "image/png",
                                                             "size": 12}},
         MediaRef("mxc://example.org/cat", "cat.png", "image/png", 12)),
        ("m.file", {"file": SEALED},
         MediaRef("mxc://example.org/sealed", "cat.png",
                  sealed={k: v for k, v in SEALED.items() if k != "url"})),
        ("m.audio", {"url": "mxc://example.org/cat", "info": {"size": True}},  # not a size
         MediaRef("mxc://example.org/cat", "cat.png")),
    ],
)  # fmt: skip
def test_a_media_message_is_its_file_and_no_text(msgtype, content, ref):
    event = read(message("cat.png", msgtype, **content))
    assert event.text == ""  # the body names the file: no caption
    [attachment] = event.attachments
    assert MediaRef.from_text(attachment) == ref


@pytest.mark.parametrize(
    ("msgtype", "content"),
    [
        ("m.audio", {"url": "https://example.org/song.ogg"}),  # not a Matrix URL
        ("m.video", {"file": "not a dict"}),
        ("m.image", {"url": "mxc://example.org/../../etc"}),  # no media id
        ("m.text", {"url": "mxc://example.org/cat"}),  # text carries no media
    ],
)
def test_what_names_no_fetchable_file_is_its_body(msgtype, content):
    event = read(message("cat.png", msgtype, **content))
    assert (event.text, event.attachments) == ("cat.png", ())


def test_a_caption_is_the_body_beside_another_filename():
    event = read(message("look at this", "m.image", url="mxc://example.org/cat",
                         filename="cat.png"))  # fmt: skip
    assert event.text == "look at this"
    assert MediaRef.from_text(event.attachments[0]).name == "cat.png"
    same = read(message("cat.png", "m.image", url="mxc://example.org/cat", filename="cat.png"))
    assert same.text == ""


def test_media_without_a_body_is_taken():
    event = read(message("", "m.image", url="mxc://example.org/cat"))
    assert event.text == "" and MediaRef.from_text(event.attachments[0]).name == "attachment"


def test_another_msgtype_is_its_body_if_it_has_one():
    location = message("Big Ben", "m.location", geo_uri="geo:51.5007,-0.1246")
    assert read(location).text == "Big Ben"
    assert read(message("", "org.example.custom")) is None
    assert read(message("  \n", "m.text")) is None


def without(key: str) -> dict:
    event = message()
    del event[key]
    return event


@pytest.mark.parametrize(
    "event",
    [
        {**message(), "type": "m.room.encrypted"},  # left undecrypted
        {**message(), "type": "m.reaction"},
        {**message(), "type": "m.room.redaction"},
        {**message(), "type": "m.room.member", "state_key": ME},
        without("content"),
        without("sender"),
        without("event_id"),
        {**message(), "content": "not a dict"},
        {**message(), "sender": 7},
        {**message(), "event_id": ""},
        message(5),
        message(None),
        message(["a", "list"]),
        message(**{"m.relates_to": "not a dict"}),
        message(**{"m.relates_to": None}),
        {"type": "m.room.message", "event_id": "$ev", "sender": ANN, "content": {}},  # redacted
        [],
        None,
    ],
)  # fmt: skip
def test_a_malformed_or_foreign_event_is_skipped_never_a_crash(event):
    assert read(event) is None


def test_malformed_relations_inside_are_left_out():
    odd = message(**{"m.relates_to": {"m.in_reply_to": "x", "rel_type": "m.thread",
                                      "event_id": 7}})  # fmt: skip
    event = read(odd)
    assert (event.thread_id, event.reply_to) == (None, None)


def test_a_long_text_is_cut_with_a_note():
    assert read(message("x" * MAX_TEXT)).text == "x" * MAX_TEXT
    text = read(message("x" * MAX_TEXT + "yz")).text
    assert text.startswith("x" * MAX_TEXT + "\n[") and "y" not in text
    assert f"cut at {MAX_TEXT} characters" in text
