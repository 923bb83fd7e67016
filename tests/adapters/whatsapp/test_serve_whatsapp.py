"""WhatsApp end to end: `hermes serve` as a process, the fake Cloud API delivering signed
webhooks to serve's listener, the fake model answering."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.adapters.serving import in_thread
from tests.adapters.whatsapp.serving import ANN, BOB
from tests.fakes.openai import text_answer, tool_answer


@pytest.mark.timeout(60)
async def test_a_text_is_admitted_before_the_200_and_answered(serve, model, wa):
    model.script(text_answer("Hello from hermes"))
    await in_thread(serve.start)
    wamid = wa.deliver_text(ANN, "hi there")
    [sent] = await in_thread(wa.wait_sent, 1, 30.0)
    assert sent["to"] == ANN and sent["kind"] == "text"
    assert (sent["text"], sent["preview_url"]) == ("Hello from hermes", False)
    delivered = wa.wait_delivered(wamid)
    assert delivered["status_codes"] == [200]
    [read] = await in_thread(wa.wait_reads, 1, 30.0)
    assert read["message_id"] == wamid
    assert serve.journal() == [("whatsapp", wamid, "answered")]
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_delivery_with_a_bad_signature_is_refused_and_nothing_admitted(serve, wa):
    await in_thread(serve.start)
    wamid = wa.deliver_text(ANN, "forged", bad_signature=True)
    attempts = await in_thread(wa.wait_attempts, 1, 30.0)
    assert attempts[0]["id"] == wamid and attempts[0]["status_code"] == 403
    serve.stop()
    assert serve.journal() == []
    assert wa.sent == []


@pytest.mark.timeout(60)
async def test_the_verification_handshake_answers_only_the_right_token(serve, wa):
    await in_thread(serve.start)
    right = await in_thread(wa.verify, "subscribe", None, "challenge-123")
    wrong = await in_thread(wa.verify, "subscribe", "not-the-token", "challenge-456")
    assert right == (200, "challenge-123")
    assert wrong[0] == 403 and "challenge-456" not in wrong[1]
    serve.stop()


@pytest.mark.timeout(60)
async def test_a_failed_status_after_the_send_was_taken_turns_its_row_dead(serve, model, wa):
    model.script(text_answer("this will not arrive"))
    wa.fail_next_send(ANN, 131026)
    await in_thread(serve.start)
    wa.deliver_text(ANN, "hello")
    [sent] = await in_thread(wa.wait_sent, 1, 30.0)
    await in_thread(wa.wait_delivered, sent["wamid"], "failed")  # 200: committed by then
    serve.stop()
    [(_, state, error, message_id)] = serve.outbox()
    assert (state, message_id) == ("dead", sent["wamid"])
    assert "(131026)" in error


@pytest.mark.timeout(60)
@pytest.mark.parametrize("template", [True, False])
async def test_a_brief_to_a_user_silent_for_25_hours(serve, model, wa, template):
    """Sent as the template when one is configured; else dead at once, saying why."""
    if template:
        serve.configure(platform="    template: hermes_brief\n")
    wa.silent_for(ANN, 25 * 3600)
    model.script(text_answer("Markets are up.\nMore below."))
    await in_thread(serve.start)
    added = await serve.rpc("cron.add", {"schedule": "every 1h", "prompt": "the news",
                                         "name": "news", "deliver": f"whatsapp:{ANN}"})  # fmt: skip
    assert "result" in added, added
    await serve.rpc("cron.run", {"job": "news"})
    if template:
        [sent] = await in_thread(wa.wait_sent, 1, 30.0)
        assert (sent["kind"], sent["template"]) == ("template", "hermes_brief")
        assert sent["parameters"] == ["Markets are up."]
        serve.stop()
        assert [state for _, state, *_ in serve.outbox()] == ["sent"]
    else:
        await serve.until_outbox("dead")
        serve.stop()
        [(_, state, error, _)] = serve.outbox()
        assert state == "dead" and "outside WhatsApp's 24-hour window" in error
        assert "platforms.whatsapp.template" in error
        assert wa.sent == []


@pytest.mark.timeout(60)
async def test_a_voice_note_arrives_as_a_file_the_agent_reads(serve, model, wa):
    model.script(text_answer("heard you"))
    note = b"OggS-fake-voice-note"
    media_id = wa.add_media(note, "audio/ogg")
    await in_thread(serve.start)
    wa.deliver_media(ANN, "voice", media_id)
    await in_thread(wa.wait_sent, 1, 30.0)
    serve.stop()
    asked = model.requests[0]["body"]["messages"][-1]["content"]
    path = next(word for word in asked.split() if "cache/whatsapp/" in word).strip("[]()")
    assert Path(path).read_bytes() == note
    assert wa.downloads == [media_id]


@pytest.mark.timeout(90)
async def test_a_sigkill_after_the_200_and_before_the_answer_yields_one_answer(serve, model, wa):
    """Admitted before the 200 is all a SIGKILL leaves: the next serve answers it, once,
    and the same delivery coming again is recognised."""
    model.delay = 30.0
    await in_thread(serve.start)
    wamid = wa.deliver_text(ANN, "what is the answer?")
    await in_thread(wa.wait_delivered, wamid)  # Meta got its 200
    await in_thread(model.wait_requests, 1)  # the model thinks; nothing answered yet
    serve.kill()
    assert [state for *_, state in serve.journal()] == ["started"]
    model.delay = 0.0
    model.script(text_answer("42"))
    await in_thread(serve.start)
    [sent] = await in_thread(wa.wait_sent, 1, 30.0)
    again = wa.deliver_payload(wa.delivery(wamid)["payload"], key="again")  # Meta, again
    await in_thread(wa.wait_delivered, again)
    serve.stop()
    assert sent["text"].endswith("42") and len(wa.sent) == 1
    assert [state for *_, state in serve.journal()] == ["answered"]
    assert len(model.requests) == 2


@pytest.mark.timeout(60)
async def test_a_rate_error_delays_only_that_send(serve, model, wa):
    serve.configure(access=f"    allowed_users: ['{ANN}', '{BOB}']\n    owner: '{ANN}'\n")
    model.script(text_answer("for you"), text_answer("for you"))
    wa.fail(130429, to=ANN, times=1000)  # Ann's sends stay limited until Bob's went
    await in_thread(serve.start)
    wa.deliver_text(ANN, "first")
    [refused, *_] = await in_thread(wa.wait_refused, 1, 30.0)
    assert (refused["to"], refused["code"]) == (ANN, 130429)
    wa.deliver_text(BOB, "second", name="Bob")
    await in_thread(wa.wait_sent, 1, 30.0)
    wa.clear_faults()
    sent = await in_thread(wa.wait_sent, 2, 30.0)
    serve.stop()
    assert [s["to"] for s in sent] == [BOB, ANN]  # Bob's went while Ann's waited
    assert [state for _, state, *_ in serve.outbox()] == ["sent", "sent"]


@pytest.mark.timeout(90)
async def test_a_delivery_answered_5xx_comes_again_and_is_answered_once(serve, model, wa):
    """While the adapter cannot take it (here: its token refused, so it stopped), the
    listener answers 503; Meta delivers again, and the serve after the fix answers once."""
    serve.wrong_token = True
    await in_thread(serve.start)
    wamid = wa.deliver_text(ANN, "are you there?")
    attempts = await in_thread(wa.wait_attempts, 2, 30.0)  # 503, then again
    assert {a["status_code"] for a in attempts} == {503}
    serve.stop()
    assert serve.journal() == []  # nothing was admitted
    serve.wrong_token = False
    model.script(text_answer("yes"))
    await in_thread(serve.start)  # the fake's next try goes to its listener
    await in_thread(wa.wait_delivered, wamid, None, 30.0)
    [sent] = await in_thread(wa.wait_sent, 1, 30.0)
    serve.stop()
    assert sent["text"] == "yes" and len(wa.sent) == 1
    assert [state for *_, state in serve.journal()] == ["answered"]


def _sends_a_file(model, command: str, path: str, caption: str | None = "here it is") -> None:
    """The model makes a file with the terminal, sends it, and says so."""
    sending = {"path": path} | ({} if caption is None else {"caption": caption})
    model.script(
        tool_answer(("terminal", {"command": command})),
        tool_answer(("send_file", sending)),
        text_answer("Sent you the chart."),
    )


@pytest.mark.timeout(60)
async def test_send_file_uploads_it_and_sends_a_document_with_its_caption(serve, model, wa):
    _sends_a_file(model, "printf 'the chart' > chart.txt", "chart.txt")
    await in_thread(serve.start)
    wa.deliver_text(ANN, "send me the chart")
    [doc] = await in_thread(wa.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    assert (doc["to"], doc["type"], doc["filename"], doc["mime"]) == (
        ANN, "document", "chart.txt", "text/plain")  # fmt: skip
    assert doc["content"] == b"the chart" and doc["caption"] == "here it is"
    [kept] = wa.uploaded
    assert kept["media_id"] == doc["media_id"]
    assert [s["kind"] for s in wa.sent] == ["document", "text"]
    assert wa.sent[1]["text"] == "Sent you the chart."
    assert [state for _, state, *_ in serve.outbox()] == ["sent", "sent"]


@pytest.mark.timeout(60)
async def test_an_image_goes_as_an_image_and_one_over_5_mb_as_a_document(serve, model, wa):
    model.script(
        tool_answer(("terminal", {"command": "printf 'PNG' > small.png; truncate -s 6M big.png"})),
        tool_answer(("send_file", {"path": "small.png", "caption": "small"})),
        tool_answer(("send_file", {"path": "big.png"})),
        text_answer("Both sent."),
    )
    await in_thread(serve.start)
    wa.deliver_text(ANN, "send me the pictures")
    small, big = await in_thread(wa.wait_uploads, 2, 30.0)
    await serve.until_outbox("sent", 3)
    serve.stop()
    assert (small["type"], small["mime"], small["caption"], small["content"]) == (
        "image", "image/png", "small", b"PNG")  # fmt: skip
    assert (big["type"], big["filename"], big["size"]) == ("document", "big.png", 6 * 1024 * 1024)
    assert big["mime"] == "application/octet-stream"  # declared image/png, Meta refuses it
    assert big["sha256"] == hashlib.sha256(bytes(6 * 1024 * 1024)).hexdigest()


@pytest.mark.timeout(60)
async def test_a_voice_reply_goes_as_audio_without_a_caption(serve, model, wa):
    serve.configure(top=f"media:\n  speak:\n    base_url: '{model.url}'\n"
                        "    platforms: [whatsapp]\n")  # fmt: skip
    model.script(text_answer("Hello there."))
    await in_thread(serve.start)
    wa.deliver_text(ANN, "say hello")
    [voice] = await in_thread(wa.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    [spoken] = model.speeches
    assert (voice["type"], voice["mime"], voice["caption"]) == ("audio", "audio/ogg", None)
    assert voice["sha256"] == spoken["sha256"]
    assert [s["kind"] for s in wa.sent] == ["text", "audio"]  # the text first


@pytest.mark.timeout(90)
async def test_a_lost_upload_answer_sends_it_all_again_and_once(serve, model, wa):
    """The upload shows the user nothing: its answer lost, the whole send goes again."""
    _sends_a_file(model, "printf 'the chart' > chart.txt", "chart.txt")
    wa.lose_answer("media")
    await in_thread(serve.start)
    wa.deliver_text(ANN, "send me the chart")
    [doc] = await in_thread(wa.wait_uploads, 1, 30.0)
    await serve.until_outbox("sent", 2)
    serve.stop()
    lost, again = wa.uploaded  # Meta kept the first; its id never came back
    assert doc["media_id"] == again["media_id"] != lost["media_id"]
    assert doc["content"] == b"the chart" and len(wa.uploads) == 1


@pytest.mark.timeout(60)
async def test_a_lost_answer_of_the_files_message_is_unknown_and_never_sent_twice(serve, model, wa):
    _sends_a_file(model, "printf 'the chart' > chart.txt", "chart.txt")
    wa.lose_answer("messages")  # the first send is the file's
    await in_thread(serve.start)
    wa.deliver_text(ANN, "send me the chart")
    [doc] = await in_thread(wa.wait_uploads, 1, 30.0)
    await serve.until_outbox("unknown")
    await serve.until_outbox("sent")  # the answer's text after it
    serve.stop()
    assert doc["content"] == b"the chart"
    assert len(wa.uploaded) == 1 and len(wa.uploads) == 1
    assert [state for _, state, *_ in serve.outbox()] == ["unknown", "sent"]


@pytest.mark.timeout(60)
async def test_a_file_over_100_mb_is_a_message_and_no_upload(serve, model, wa):
    _sends_a_file(model, "truncate -s 101M big.bin", "big.bin", None)  # sparse
    await in_thread(serve.start)
    wa.deliver_text(ANN, "send me the big one")
    await in_thread(wa.wait_sent, 2, 30.0)
    serve.stop()
    told = [s["text"] for s in wa.sent if "big.bin was not sent" in (s["text"] or "")]
    assert told and "over the 100.0 MB whatsapp takes" in told[0]
    assert wa.uploaded == [] and wa.uploads == []
