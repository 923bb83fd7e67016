"""A delivery older than the inbound journal remembers (retention.journal_days) is
refused by its own timestamp: acknowledged (200, so Meta stops retrying it), never
admitted, logged once. A message without a timestamp is admitted as it always was."""

from __future__ import annotations

import time

import pytest

from hermes.adapters.whatsapp.inbound import DAY, forgotten, messages
from tests.adapters.serving import in_thread
from tests.adapters.whatsapp.serving import ANN
from tests.fakes.openai import text_answer
from tests.fakes.whatsapp import DISPLAY_PHONE_NUMBER, PHONE_NUMBER_ID, WABA_ID

NOW = 1_750_000_000.0
REFUSED = "acknowledged, not admitted"


def test_older_than_the_journal_reaches_back_is_forgotten():
    assert forgotten(NOW - 8 * DAY, NOW, 7.0)
    assert forgotten(NOW - 7 * DAY - 1, NOW, 7.0)
    assert forgotten(NOW - 7 * DAY + 60, NOW, 7.0)  # Meta's clock may run a little ahead
    assert not forgotten(NOW - 6 * DAY, NOW, 7.0)
    assert not forgotten(NOW - 2 * DAY, NOW, 7.0) and forgotten(NOW - 2 * DAY, NOW, 1.0)
    assert not forgotten(0.0, NOW, 7.0)  # no timestamp: admitted as ever
    assert not forgotten(NOW + 2 * DAY, NOW, 7.0)  # from the future: admitted
    # a window shorter than the clock margin keeps at least half of itself
    assert not forgotten(NOW - 40, NOW, 100 / DAY) and forgotten(NOW - 60, NOW, 100 / DAY)


def one_text(wamid: str, text: str, timestamp: str | None = None) -> dict:
    """Meta's payload of one text from ANN, with `timestamp` as given (None: none)."""
    message = {"from": ANN, "id": wamid, "type": "text", "text": {"body": text}}
    if timestamp is not None:
        message["timestamp"] = timestamp
    value = {
        "messaging_product": "whatsapp",
        "metadata": {
            "display_phone_number": DISPLAY_PHONE_NUMBER,
            "phone_number_id": PHONE_NUMBER_ID,
        },
        "contacts": [{"profile": {"name": "Ann"}, "wa_id": ANN}],
        "messages": [message],
    }
    change = {"value": value, "field": "messages"}
    return {"object": "whatsapp_business_account", "entry": [{"id": WABA_ID, "changes": [change]}]}


def test_a_timestamp_that_is_no_time_reads_as_none():
    for given in ("inf", "-inf", "nan", "-5", "soon", None):
        [found] = messages(one_text("wamid.1", "hi", given), "whatsapp", PHONE_NUMBER_ID)
        assert found.written_at == 0.0, given
    [found] = messages(one_text("wamid.1", "hi", "1750000000"), "whatsapp", PHONE_NUMBER_ID)
    assert found.written_at == NOW


@pytest.mark.timeout(90)
async def test_a_delivery_older_than_the_journal_is_acknowledged_and_not_admitted(serve, model, wa):
    """With `retention.journal_days: 2`, a message written three days ago gets its 200 and
    nothing more; one written an hour ago and one with no timestamp are answered."""
    serve.configure(top="retention:\n  journal_days: 2\n")
    model.script(text_answer("the recent one"), text_answer("the untimed one"))
    await in_thread(serve.start)
    old = wa.deliver_text(ANN, "from three days ago", timestamp=time.time() - 3 * DAY)
    stale = await in_thread(wa.wait_delivered, old)
    recent = wa.deliver_text(ANN, "from an hour ago", timestamp=time.time() - 3600)
    await in_thread(wa.wait_sent, 1, 30.0)
    wa.deliver_payload(one_text("wamid.untimed", "when? nobody says"), key="untimed")
    await in_thread(wa.wait_delivered, "untimed")
    sent = await in_thread(wa.wait_sent, 2, 30.0)
    log = serve.stop()
    assert stale["status_codes"] == [200]  # acknowledged once: Meta stops retrying it
    assert serve.journal() == [
        ("whatsapp", recent, "answered"), ("whatsapp", "wamid.untimed", "answered"),
    ]  # fmt: skip
    assert [s["text"] for s in sent] == ["the recent one", "the untimed one"]
    assert len(model.requests) == 2
    [line] = [line for line in log.splitlines() if REFUSED in line]
    assert old in line and "journal_days: 2" in line
