"""WhatsApp's adapter in this process behind the real webhook listener on a free port of
127.0.0.1, on the fake Cloud API, with an `admit` the test reads (tests/adapters/
inprocess.py): for tests that speak HTTP to the listener themselves, as a forger or a
platform that sends too much would, and then look at what was admitted."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from hermes.adapters.webhooks import WebhookListener
from hermes.adapters.whatsapp.adapter import WhatsAppAdapter
from hermes.adapters.whatsapp.config import WhatsAppConfig
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, running
from tests.adapters.serving import in_thread
from tests.adapters.whatsapp.serving import ANN, WhatsAppServe
from tests.fakes.whatsapp import (
    APP_SECRET,
    DISPLAY_PHONE_NUMBER,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    WABA_ID,
    FakeWhatsApp,
    serialise,
)

_NUMBERS = itertools.count(1)


@attrs.frozen
class Listening:
    """The listener's URL for WhatsApp, and what the adapter behind it admitted."""

    url: str
    port: int
    admissions: Admissions


@asynccontextmanager
async def listening(wa: FakeWhatsApp, max_body: int = 1 << 20) -> AsyncIterator[Listening]:
    """The adapter on `wa`, connected (it read its number), behind a listener that reads a
    body up to `max_body` bytes; the fake's own deliveries go to it too."""
    config = WhatsAppConfig(token_env="WA_TOKEN", app_secret_env="WA_SECRET",
                            verify_token_env="WA_VERIFY", base_url=wa.graph_url,
                            phone_number_id=PHONE_NUMBER_ID)  # fmt: skip
    secrets = Secrets({"WA_TOKEN": TOKEN, "WA_SECRET": APP_SECRET, "WA_VERIFY": VERIFY_TOKEN},
                      frozenset())  # fmt: skip
    admissions = Admissions()
    ports: list[int] = []
    async with running(WhatsAppAdapter, "whatsapp", config, secrets, admissions) as run:
        listener = WebhookListener("127.0.0.1", 0, frozenset({"whatsapp"}),
                                   lambda _: run.adapter.current(), max_body,
                                   ports.append)  # fmt: skip
        async with trio.open_nursery() as nursery:
            await nursery.start(listener.run)
            url = WhatsAppServe.webhook_url(ports[0])
            wa.configure(webhook_url=url)
            await in_thread(lambda: wa.wait_until(lambda f: f.number_lookups > 0,
                                                  what="the number read"))  # fmt: skip
            yield Listening(url, ports[0], admissions)
            listener.stop()


def text_delivery(text: str, user: str = ANN) -> tuple[str, bytes]:
    """A delivery of one text from `user`, as Meta serialises it: its wamid and body."""
    wamid = f"wamid.holds{next(_NUMBERS)}"
    message = {"from": user, "id": wamid, "timestamp": str(int(time.time())), "type": "text",
               "text": {"body": text}}  # fmt: skip
    value = {
        "messaging_product": "whatsapp",
        "metadata": {
            "display_phone_number": DISPLAY_PHONE_NUMBER,
            "phone_number_id": PHONE_NUMBER_ID,
        },
        "contacts": [{"profile": {"name": "Ann"}, "wa_id": user}],
        "messages": [message],
    }
    payload = {
        "object": "whatsapp_business_account",
        "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
    }
    return wamid, serialise(payload)
