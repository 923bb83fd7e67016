"""Matrix media both ways, through `hermes serve` on the fake homeserver: a file from an
allowed user fetched with the token (a stranger's never), an encrypted image from the
Element-like client decrypted, send_file in a room in the clear and in an encrypted one
(which Alice's client decrypts); and the media module on its own against the fake: a
file whose hash is not its event's refused, an older homeserver's download path, the
event a voice note goes as."""

from __future__ import annotations

import functools
import hashlib
import io
import re
from pathlib import Path

import httpx
import pytest
from PIL import Image

from hermes.adapters.contract import OutFile
from hermes.adapters.matrix.media import MediaRef, Uploaded, fetch_media, file_content, media_of
from hermes.adapters.media import MediaLimits
from tests.adapters.matrix.test_serve_matrix import started, user_words
from tests.adapters.serving import in_thread
from tests.fakes.matrix import ALICE, BOB, HERMES, HERMES_TOKEN, FakeMatrix
from tests.fakes.openai import text_answer, tool_answer

SAVED = re.compile(r"\[attached (?:image|audio|file): [^\n]*\) at (/[^\n]*)\]")


def saved_bytes(words: str) -> bytes:
    """The bytes of the file an `[attached ...]` line names (its copy in the cache)."""
    [path] = SAVED.findall(words)
    return Path(path).read_bytes()


def from_hermes(hs: FakeMatrix) -> list[dict]:
    return [s for s in hs.sent if s["sender"] == HERMES]


def chart_script(model) -> None:
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent you the chart."),
    )


@pytest.mark.timeout(90)
async def test_a_file_from_alice_is_fetched_and_a_strangers_never(serve, model, hs):
    alices = hs.create_room([ALICE, HERMES], direct=True)
    bobs = hs.create_room([BOB, HERMES], direct=True)
    model.script(text_answer("Got your file."))
    await started(serve, hs)
    theirs = hs.add_media(b"stranger's bytes", "text/plain", "x.txt")
    hs.message(bobs, BOB, "x.txt", msgtype="m.file", url=theirs,
               info={"mimetype": "text/plain", "size": 16})  # fmt: skip
    hers = hs.add_media(b"owner's bytes", "text/plain", "y.txt")
    hs.message(alices, ALICE, "y.txt", msgtype="m.file", url=hers,
               info={"mimetype": "text/plain", "size": 13})  # fmt: skip
    await in_thread(functools.partial(hs.wait_sent, 1, 30.0, room=alices))
    await serve.until_outbox("sent", 1)
    serve.stop()
    [download] = hs.downloads  # Alice's only
    assert (download["mxc"], download["user"], download["authenticated"]) == (hers, HERMES, True)
    [words] = user_words(model)
    assert "[attached file: " in words and "text/plain, 13 bytes" in words
    assert saved_bytes(words) == b"owner's bytes"
    assert len(serve.journal()) == 2 and len(model.requests) == 1  # Bob's: admitted, refused


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 20), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


@pytest.mark.timeout(90)
async def test_an_encrypted_image_from_element_is_decrypted(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    picture = png()
    model.script(text_answer("A red rectangle."))
    await started(serve, hs)
    await in_thread(functools.partial(alice.send_file, room, picture, "red.png", "image/png",
                                      msgtype="m.image", caption="what is this?"))  # fmt: skip
    [answer] = await in_thread(lambda: alice.wait_messages(room, 1, sender=HERMES))
    serve.stop()
    assert answer.content["body"] == "A red rectangle."
    [upload] = hs.uploads
    assert upload["content"] != picture and upload["content_type"] == "application/octet-stream"
    [words] = user_words(model)
    assert words.startswith("what is this?") and "[attached image: " in words
    assert f"image/png, {len(picture)} bytes" in words
    assert saved_bytes(words) == picture  # decrypted, its hash checked


@pytest.mark.timeout(90)
async def test_send_file_in_a_clear_room_is_an_m_file(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True)
    chart_script(model)
    await started(serve, hs)
    await in_thread(alice.send_text, room, "send me the chart")
    [upload] = await in_thread(functools.partial(hs.wait_uploads, 1, 30.0))
    await serve.until_outbox("sent", 2)
    serve.stop()
    assert (upload["user"], upload["filename"], upload["content_type"]) == (
        HERMES, "chart.txt", "text/plain")  # fmt: skip
    assert upload["content"] == b"the chart"
    file, text = from_hermes(hs)
    assert file["type"] == "m.room.message" and not file["encrypted_room"]
    content = file["content"]
    assert (content["msgtype"], content["body"], content["filename"]) == (
        "m.file", "here it is", "chart.txt")  # fmt: skip
    assert content["url"] == upload["mxc"] and content["info"]["size"] == 9
    assert await in_thread(alice.download, content) == b"the chart"
    assert text["content"]["body"] == "Sent you the chart."


@pytest.mark.timeout(90)
async def test_send_file_in_an_encrypted_room_is_read_by_alices_client(serve, model, hs, alice):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    chart_script(model)
    await started(serve, hs)
    await in_thread(alice.send_text, room, "send me the chart")
    file, text = await in_thread(lambda: alice.wait_messages(room, 2, sender=HERMES))
    serve.stop()
    [upload] = hs.uploads
    assert upload["content"] != b"the chart" and upload["size"] == 9  # CTR keeps the length
    assert upload["content_type"] == "application/octet-stream"
    assert file.encrypted and all(s["type"] == "m.room.encrypted" for s in from_hermes(hs))
    content = file.content
    assert (content["msgtype"], content["body"], content["filename"]) == (
        "m.file", "here it is", "chart.txt")  # fmt: skip
    assert "url" not in content and content["file"]["url"] == upload["mxc"]
    assert await in_thread(alice.download, content) == b"the chart"
    assert text.content["body"] == "Sent you the chart."


@pytest.mark.timeout(90)
async def test_a_file_the_homeserver_finds_too_large_is_a_dead_letter(serve, model, hs, alice):
    hs.max_upload = 4  # below MATRIX.max_upload: the homeserver's own limit refuses it
    room = hs.create_room([ALICE, HERMES], direct=True)
    chart_script(model)
    await started(serve, hs)
    await in_thread(alice.send_text, room, "send me the chart")
    await serve.until_outbox("dead", 1)
    await serve.until_outbox("sent", 1)
    serve.stop()
    assert hs.uploads == [] and [r["status"] for r in hs.requests
                                 if r["endpoint"] == "upload"] == [413]  # fmt: skip
    [(_, _, error, _)] = [row for row in serve.outbox() if row[1] == "dead"]
    assert "M_TOO_LARGE" in error
    assert [s["content"]["body"] for s in from_hermes(hs)] == ["Sent you the chart."]


# -- the media module against the fake --------------------------------------------------


async def fetch(hs: FakeMatrix, ref: MediaRef, directory: Path):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {HERMES_TOKEN}"}) as http:
        return await fetch_media(http, hs.url, (ref.to_text(),), directory, MediaLimits())


async def test_an_encrypted_file_whose_hash_is_not_its_events_is_refused(hs, alice, tmp_path):
    room = hs.create_room([ALICE, HERMES], direct=True, encrypted=True)
    await in_thread(alice.send_file, room, b"secret", "s.txt", "text/plain")
    [sent] = await in_thread(lambda: alice.wait_messages(room, 1))  # as it reads its own
    ref = media_of(sent.content)
    assert ref is not None and ref.sealed is not None
    good = await fetch(hs, ref, tmp_path)
    assert [Path(f.path).read_bytes() for f in good.files] == [b"secret"]
    forged = {**ref.sealed, "hashes": {"sha256": "A" * 43}}
    bad = await fetch(hs, MediaRef(ref.url, "t.txt", "text/plain", 6, forged), tmp_path)
    assert bad.files == () and "hash" in bad.problems[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [good.files[0].name]  # no t.txt


async def test_an_older_homeserver_is_fetched_from_its_v3_path(hs, tmp_path):
    hs.authenticated_media = False
    mxc = hs.add_media(b"old media", "text/plain", "old.txt")
    fetched = await fetch(hs, MediaRef(mxc, "old.txt"), tmp_path)
    [saved] = fetched.files
    assert Path(saved.path).read_bytes() == b"old media" and saved.mime == "text/plain"
    assert saved.sha256 == hashlib.sha256(b"old media").hexdigest()
    [download] = hs.downloads
    assert download["authenticated"] is False


async def test_unknown_media_is_a_problem_line(hs, tmp_path):
    fetched = await fetch(hs, MediaRef("mxc://test.local/gone", "gone.txt"), tmp_path)
    assert fetched.files == () and "HTTP 404" in fetched.problems[0]


def test_a_voice_note_goes_as_elements_voice_message():
    note = OutFile("/x/note.ogg", "note.ogg", "audio/ogg", 5, voice=True)
    content = file_content(note, "", Uploaded("mxc://test.local/n"))
    assert (content["msgtype"], content["body"], content["url"]) == (
        "m.audio", "note.ogg", "mxc://test.local/n")  # fmt: skip
    assert content["org.matrix.msc3245.voice"] == {} and "org.matrix.msc1767.audio" in content
    picture = OutFile("/x/a.png", "a.png", "image/png", 5)
    assert file_content(picture, "look", Uploaded("mxc://t/p"))["msgtype"] == "m.image"
