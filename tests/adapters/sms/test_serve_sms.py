"""SMS end to end: one `hermes serve` process for the module (each test texts from numbers
of its own), the fake Twilio delivering signed webhooks through the reverse proxy it
plays, the fake model answering (multimodal: an MMS image reaches it as an image)."""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image

from hermes.home import HermesHome
from tests.adapters.serving import in_thread
from tests.adapters.sms.serving import ANN, SmsServe
from tests.fakes.openai import FakeOpenAI, text_answer, tool_answer
from tests.fakes.twilio import PLAIN_URL, FakeTwilio
from tests.seed import rows

pytestmark = pytest.mark.timeout(60)
BEA, CAL, DEE, EVE = "+15551230002", "+15551230003", "+15551230004", "+15551230005"
STRANGER = "+15559990000"
ACCESS = f"    allowed_users: ['{ANN}', '{BEA}', '{CAL}', '{DEE}', '{EVE}']\n    owner: '{ANN}'\n"
TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def multimodal(model: FakeOpenAI) -> str:
    return (
        f"model: {{provider: fake, model: m, base_url: '{model.url}', multimodal: true,"
        " image_max_px: 512}\n"
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[SmsServe, FakeTwilio, FakeOpenAI]]:
    """Serve on a home of the module's own, started once (a test that stops it starts it
    again)."""
    home = HermesHome(tmp_path_factory.mktemp("sms") / "hermes-home").ensure()
    with FakeTwilio() as fake, FakeOpenAI() as model:
        serve = SmsServe(home, fake, model)
        serve.configure(access=ACCESS, model=multimodal(model))
        try:
            serve.start()
            fake.wait_until(lambda f: f.account_reads > 0, what="the account read")
            yield serve, fake, model
            serve.stop()
        finally:
            serve.close()


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """The module's serve outlives each test: `shared` stops it, and checks it exited
    cleanly, once the module is done (tests/conftest.py's check is per test)."""
    yield


@pytest.fixture
def sms(shared):
    return shared


async def sent_to(fake: FakeTwilio, number: str, count: int) -> list[dict]:
    """The messages hermes sent to `number`, once there are `count`."""
    return await in_thread(functools.partial(fake.wait_sent, count, 30.0, channel=number))


def journal_size(serve: SmsServe) -> int:
    return rows(serve.home.state_db, "SELECT count(*) FROM inbound_journal")[0][0]


async def test_a_text_is_admitted_before_the_empty_twiml_and_answered(sms):
    serve, fake, model = sms
    model.script(text_answer("Hello from hermes"))
    sid = fake.message("hi there", ANN)
    [sent] = await sent_to(fake, ANN, 1)
    assert (sent["body"], sent["from"]) == ("Hello from hermes", fake.sent[0]["from"])
    assert sent["status_callback"] == f"{PLAIN_URL}/status#rc=5&rp=all"  # joined, as typed
    delivered = await in_thread(fake.wait_delivered, sid)
    assert (delivered["status_code"], delivered["body"]) == (200, TWIML)
    assert delivered["content_type"].startswith("text/xml")
    assert ("sms", sid, "answered") in serve.journal()
    assert "hi there" in str(model.requests[-1]["body"]["messages"][-1]["content"])


async def test_forged_signatures_are_refused_403_and_cost_nothing(sms):
    serve, fake, model = sms
    journal, asked = journal_size(serve), len(model.requests)
    for forge in ("token", "url", "none"):
        sid = fake.message(f"forged by {forge}", BEA, forge=forge)
        [attempt] = await in_thread(fake.wait_attempts, sid)
        assert attempt["status_code"] == 403, forge
    assert journal_size(serve) == journal and len(model.requests) == asked
    assert fake.sent_to(BEA) == []


async def test_a_redelivered_message_is_answered_once(sms):
    serve, fake, model = sms
    model.script(text_answer("once"))
    sid = fake.message("are you there?", CAL)
    await sent_to(fake, CAL, 1)
    asked = len(model.requests)
    fake.deliver_again(sid)
    [_, again] = await in_thread(fake.wait_attempts, sid, 2)
    assert again["status_code"] == 200  # recognised: taken, not answered again
    model.script(text_answer("and this"))
    fake.message("next", CAL)  # answered after the redelivery was handled
    await sent_to(fake, CAL, 2)
    assert [s["body"] for s in fake.sent_to(CAL)] == ["once", "and this"]
    assert len(model.requests) == asked + 1


async def test_opt_out_keywords_are_left_to_twilio_and_yes_is_an_answer(sms):
    serve, fake, model = sms
    journal, asked = journal_size(serve), len(model.requests)
    for word in ("STOP", "help", " Start "):
        sid = fake.message(word, DEE)
        assert (await in_thread(fake.wait_delivered, sid))["status_code"] == 200
    marked = {**fake.form(sid), "MessageSid": "SM" + "d" * 32, "Body": "stop it please",
              "OptOutType": "STOP"}  # fmt: skip
    fake.deliver(marked)  # Twilio's own mark decides, whatever the body
    assert (await in_thread(fake.wait_delivered, marked["MessageSid"]))["status_code"] == 200
    assert journal_size(serve) == journal and len(model.requests) == asked
    assert fake.sent_to(DEE) == []
    model.script(text_answer("Done."))
    fake.message("Yes", DEE)  # Twilio's default opt-in keyword, and an answer to a question
    [sent] = await sent_to(fake, DEE, 1)
    assert sent["body"] == "Done." and "Yes" in str(model.requests[-1]["body"]["messages"])


async def test_a_failed_status_callback_turns_the_row_dead_with_twilios_code(sms):
    serve, fake, model = sms
    fake.fail_delivery(EVE, 30003)
    model.script(text_answer("this will not arrive"))
    dead = sum(r[1] == "dead" for r in serve.outbox())
    fake.message("hello", EVE)
    [sent] = await sent_to(fake, EVE, 1)
    await serve.until_outbox("dead", dead + 1)  # held, if early, until the send is recorded
    [row] = [r for r in serve.outbox() if r[0] == EVE]
    assert (row[1], row[3]) == ("dead", sent["sid"])
    assert "30003" in row[2] and "unreachable" in row[2]
    answers = [
        (c["attempt"], c.get("status_code")) for c in fake.callbacks if c["sid"] == sent["sid"]
    ]
    assert answers == [(1, 200)]  # answered at once, never a 5xx Twilio would not retry


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 200, 30)).save(out, "PNG")
    return out.getvalue()


async def test_an_mms_image_reaches_the_model_and_a_strangers_is_never_fetched(sms):
    serve, fake, model = sms
    fetches = len(fake.media_fetches)
    stranger = fake.message("look at this", STRANGER, media=[(_png(40, 20), "image/png")])
    await in_thread(fake.wait_delivered, stranger)
    model.script(text_answer("A green rectangle."))
    asked = len(model.requests)
    before = len(fake.sent_to(ANN))
    fake.message("what is this?", ANN, media=[(_png(1000, 500), "image/png")])
    await sent_to(fake, ANN, before + 1)
    content = model.requests[asked]["body"]["messages"][-1]["content"]
    assert isinstance(content, list)
    [text] = [p["text"] for p in content if p["type"] == "text"]
    assert text.startswith("what is this?") and "[attached image: " in text
    [url] = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
    assert url.startswith("data:image/jpeg;base64,")
    [fetch] = fake.media_fetches[fetches:]  # the allowed sender's, with the credentials
    assert fetch["authorized"] and fetch["message"] != stranger
    assert "look at this" not in str(model.requests)


async def test_a_file_goes_as_mms_media_that_twilio_fetches_from_hermes(sms):
    serve, fake, model = sms
    model.script(
        tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
        tool_answer(("send_file", {"path": "chart.txt", "caption": "the chart"})),
        text_answer("Sent."),
    )
    before = len(fake.sent_to(ANN))
    fake.message("send me the chart", ANN)  # the owner: the terminal is an owner's
    sent = (await sent_to(fake, ANN, before + 2))[before:]
    [mms] = [s for s in sent if s["media_urls"]]
    [url] = mms["media_urls"]
    token = url.removeprefix("https://hermes.example.test/webhooks/sms/media/")
    assert len(token) >= 43  # 256 random bits: unguessable
    assert mms["body"] == "the chart"
    [fetched] = [f for f in await in_thread(fake.wait_fetched, 1) if f["url"] == url]
    assert (fetched["status"], fetched["content"]) == (200, b"the chart")
    port = int((serve.home.root / "webhooks.port").read_text())
    async with httpx.AsyncClient() as http:
        guessed = await http.get(f"http://127.0.0.1:{port}/webhooks/sms/media/{token[:-1]}x")
    assert guessed.status_code == 404


async def test_without_a_media_url_a_file_is_refused_saying_why(sms):
    serve, fake, model = sms
    dead = sum(r[1] == "dead" for r in serve.outbox())
    serve.stop()
    serve.media = False
    try:
        serve.configure(access=ACCESS, model=multimodal(model))
        serve.start()
        model.script(
            tool_answer(("terminal", {"command": "printf 'the chart' > chart.txt"})),
            tool_answer(("send_file", {"path": "chart.txt", "caption": "the chart"})),
            text_answer("Tried."),
        )
        before = len(fake.sent_to(ANN))
        fake.message("send me the chart too", ANN)
        [told] = (await sent_to(fake, ANN, before + 1))[before:]
        assert told["body"] == "Tried." and not told["media_urls"]
        await serve.until_outbox("dead", dead + 1)
        [refused] = [r for r in serve.outbox() if r[0] == ANN and r[1] == "dead"]
        assert "media_url" in refused[2]
    finally:  # the module's serve as it was, for the tests after this one
        serve.stop()
        serve.media = True
        serve.configure(access=ACCESS, model=multimodal(model))
        serve.start()
