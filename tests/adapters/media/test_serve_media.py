"""Media both ways through `hermes serve` (a real process) on each chat fake: a voice
note transcribed and answered on its words, images to a multimodal model, send_file
with each platform's method and its limit, voice replies, and a stranger's attachments
never downloaded."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import trio
from PIL import Image

from tests.adapters.serving import in_thread
from tests.fakes.mcp_server import PICTURE_PNG, open_reports
from tests.fakes.openai import closed_port_url, text_answer, tool_answer
from tests.gateway.test_serve_mcp import mcp_section, until_ready

pytestmark = pytest.mark.timeout(90)


def transcribing(model) -> str:
    return f"media:\n  transcribe:\n    base_url: '{model.url}'\n    key_env: STT_KEY\n"


async def test_a_voice_note_is_transcribed_and_answered_on_its_words(
    serve, model, chat, monkeypatch
):
    monkeypatch.setenv("STT_KEY", "sk-speech")  # serve's environment: its key
    serve.configure(top=transcribing(model))
    model.answer_when("what is the weather in Paris", text_answer("Sunny in Paris."))
    serve.start()
    await in_thread(chat.ready)
    chat.send("", b"SPEECH:what is the weather in Paris", "note.ogg", "audio/ogg", voice=True)
    await in_thread(chat.fake.wait_sent, 1, 30.0)
    serve.stop()
    [heard] = model.transcriptions
    assert heard["size"] == len(b"SPEECH:what is the weather in Paris")
    assert heard["auth"] == "Bearer sk-speech"
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    assert "[voice note, transcribed]: what is the weather in Paris" in asked
    assert "[attached audio: " in asked
    assert chat.texts() == ["Sunny in Paris."]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)  # the gateway's, on any
async def test_without_speech_to_text_the_model_is_told_it_cannot_hear(serve, model, chat):
    model.script(text_answer("I cannot hear voice notes."))
    serve.start()
    await in_thread(chat.ready)
    chat.send("", b"SPEECH:secret words", "note.ogg", "audio/ogg", voice=True)
    await in_thread(chat.fake.wait_sent, 1, 30.0)
    serve.stop()
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    assert "no speech-to-text is configured" in asked and "secret words" not in asked
    assert model.transcriptions == []


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_an_image_reaches_a_multimodal_model_as_an_image_part(serve, model, chat):
    serve.configure(model=f"model: {{provider: fake, model: m, base_url: '{model.url}',"
                          " multimodal: true, image_max_px: 512}\n")  # fmt: skip
    model.script(text_answer("A red square."))
    serve.start()
    await in_thread(chat.ready)
    chat.send("what is this?", _png(2000, 1000), "red.png", "image/png")
    await in_thread(chat.fake.wait_sent, 1, 30.0)
    serve.stop()
    content = model.requests[0]["body"]["messages"][-1]["content"]
    assert isinstance(content, list)
    [text] = [p["text"] for p in content if p["type"] == "text"]
    assert text.startswith("what is this?") and "[attached image: " in text
    [url] = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
    header, data = url.split(",", 1)
    assert header == "data:image/jpeg;base64"
    assert Image.open(io.BytesIO(base64.b64decode(data))).size == (512, 256)  # downscaled


async def test_send_file_delivers_a_file_with_the_platforms_method(serve, model, chat):
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "here it is"})),
        text_answer("Sent you the chart."),
    )
    serve.start()
    await in_thread(chat.ready)
    chat.fake.message("send me the chart", **_from(chat))
    [upload] = await in_thread(chat.fake.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    assert chat.upload_name(upload).endswith("chart.txt")
    assert chat.upload_size(upload) == len(b"the chart") and upload["content"] == b"the chart"
    if chat.name == "telegram":
        assert upload["method"] == "sendDocument" and upload["caption"] == "here it is"
    elif chat.name == "slack":
        assert upload["initial_comment"] == "here it is"
    else:
        assert upload["text"] == "here it is"
    assert "Sent you the chart." in chat.texts()


async def test_a_file_over_the_platforms_limit_is_a_message_and_no_upload(serve, model, chat):
    limit = {"telegram": 50, "slack": 1024, "discord": 10}[chat.name]
    model.script(
        tool_answer(("terminal", {"command": f"truncate -s {limit + 1}M big.bin"})),  # sparse
        tool_answer(("send_file", {"path": "big.bin"})),
        text_answer("It was too large."),
    )
    serve.start()
    await in_thread(chat.ready)
    chat.fake.message("send me the big one", **_from(chat))
    await in_thread(chat.fake.wait_sent, 2, 30.0)
    serve.stop()
    told = [t for t in chat.texts() if "big.bin was not sent" in t]
    shown = {"telegram": "50.0 MB", "slack": "1024.0 MB", "discord": "9.9 MB"}[chat.name]
    assert told and f"over the {shown}" in told[0]
    assert chat.uploads() == []
    result = json.loads(model.requests[2]["body"]["messages"][-1]["content"])
    assert result["sent"] is False and result["told_the_chat"] is True


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_a_voice_reply_follows_the_text_when_enabled(serve, model, chat):
    serve.configure(top=f"media:\n  speak:\n    base_url: '{model.url}'\n"
                        "    platforms: [telegram]\n")  # fmt: skip
    model.script(text_answer("Hello there."))
    serve.start()
    await in_thread(chat.ready)
    chat.fake.message("say hello", **_from(chat))
    [upload] = await in_thread(chat.fake.wait_uploads, 1, 30.0)
    serve.stop()
    [spoken] = model.speeches
    assert spoken["input"] == "Hello there." and spoken["response_format"] == "opus"
    assert upload["method"] == "sendVoice" and upload["sha256"] == spoken["sha256"]
    assert chat.texts() == ["Hello there.", ""]  # the text first, then the voice note


async def test_a_strangers_attachments_are_never_downloaded(serve, model, chat):
    model.script(text_answer("Got your file."))
    serve.start()
    await in_thread(chat.ready)
    chat.send("look", b"stranger's bytes", "x.txt", "text/plain", user=chat.stranger)
    chat.send("look", b"owner's bytes", "y.txt", "text/plain")
    await in_thread(chat.fake.wait_sent, 1, 30.0)
    await serve.until_outbox("sent", 1)
    serve.stop()
    assert len(chat.fake.downloads) == 1  # the owner's only
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    assert "text/plain, 13 bytes" in asked  # the owner's file (the stranger's has 16)
    states = {state for _, _, state in serve.journal()}
    assert len(serve.journal()) == 2 and "answered" in states


def _from(chat) -> dict[str, object]:
    """A text message from the owner in their DM, in each fake's words."""
    if chat.name == "telegram":
        return {"user_id": int(chat.owner)}
    if chat.name == "slack":
        return {"user": chat.owner, "channel": f"D{chat.owner}"}
    return {"author_id": chat.owner, "channel_id": f"2{chat.owner}"}


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_an_image_an_mcp_tool_made_goes_to_the_chat_as_a_file(serve, model, chat):
    async with open_reports() as reports:
        serve.configure(top=mcp_section(reports.address, "echo"))
        model.script(tool_answer(("mcp_echo_picture", {})), text_answer("Here is the picture."))
        serve.start()
        await until_ready(serve, "echo")
        chat.fake.message("draw me something", **_from(chat))
        [upload] = await in_thread(chat.fake.wait_uploads, 1, 30.0)
        await in_thread(chat.fake.wait_sent, 2, 30.0)
        serve.stop()
    assert upload["method"] == "sendPhoto" and upload["content"] == PICTURE_PNG
    result = model.requests[1]["body"]["messages"][-1]["content"]
    assert "sent to the chat" in result


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_long_audio_is_cut_into_pieces_with_ffmpeg(
    serve, model, chat, require_system, monkeypatch
):
    require_system(Path("/usr/bin/ffmpeg"), packages=("ffmpeg",))
    monkeypatch.setenv("STT_KEY", "sk-speech")
    made = await trio.run_process(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
         "sine=frequency=440:duration=70", "-c:a", "libopus", "-b:a", "16k", "-f", "ogg", "-"],
        capture_stdout=True,
    )  # fmt: skip
    serve.configure(top=transcribing(model) + "    max_mb: 0.01\n    chunk_seconds: 30\n")
    model.script(text_answer("A long tone."))
    serve.start()
    chat.send("", made.stdout, "long.ogg", "audio/ogg", voice=True)
    await in_thread(chat.fake.wait_sent, 1, 60.0)
    serve.stop()
    assert len(made.stdout) > 10_000  # over max_mb: one request could not carry it
    assert len(model.transcriptions) == 3  # 70 s in pieces of 30
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    assert "[voice note, transcribed]: (inaudible) (inaudible) (inaudible)" in asked


def speaking(url: str, mode: str = "instead", hold: float = 30) -> str:
    return (f"media:\n  speak:\n    base_url: '{url}'\n    platforms: [telegram]\n"
            f"    mode: {mode}\n    hold: {hold}\n")  # fmt: skip


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_a_voice_reply_instead_of_the_text_takes_its_place(serve, model, chat):
    serve.configure(top=speaking(model.url))
    model.script(text_answer("Hello there."))
    serve.start()
    chat.fake.message("say hello", **_from(chat))
    [upload] = await in_thread(chat.fake.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 1)
    rows = serve.outbox()
    serve.stop()
    assert upload["method"] == "sendVoice" and upload["caption"] is None
    assert len(rows) == 1  # the held text was taken back: only the voice note was queued
    assert chat.texts() == [""] and serve.assistant_replies() == ["Hello there."]


@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_without_a_voice_note_the_held_text_goes_after_all(serve, model, chat):
    serve.configure(top=speaking(closed_port_url(), hold=1))  # speech cannot be reached
    model.script(text_answer("Hello there."))
    serve.start()
    chat.fake.message("say hello", **_from(chat))
    await in_thread(chat.fake.wait_sent, 1, 30.0)
    serve.stop()
    assert chat.texts() == ["Hello there."] and chat.uploads() == []
