"""Meta's signature is the one way into WhatsApp's admission: posted to the real webhook
listener over a socket, only the whole HMAC-SHA256 of the raw body under the app secret
is admitted. An empty digest, a cut one (a prefix of the right one) and a wrong one are
refused with 403 and nothing of theirs reaches the journal."""

from __future__ import annotations

import httpx
import pytest

from tests.adapters.whatsapp.listener import listening, text_delivery
from tests.fakes.whatsapp import APP_SECRET, SIGNATURE_HEADER, FakeWhatsApp, sign

PREFIX = "sha256="


def forgeries(body: bytes) -> dict[str, str | None]:
    """What a forger who does not hold the app secret might send with `body`, by name."""
    right = sign(body, APP_SECRET)
    return {
        "an empty digest": PREFIX,
        "half the digest": right[: len(PREFIX) + 32],
        "the digest less its last character": right[:-1],
        "another secret's digest": sign(body, "not-" + APP_SECRET),
        "no header": None,
    }


async def post(http: httpx.AsyncClient, url: str, body: bytes, signature: str | None) -> int:
    headers = {"content-type": "application/json"}
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    return (await http.post(url, content=body, headers=headers)).status_code


@pytest.mark.timeout(60)
async def test_only_the_whole_right_signature_is_admitted():
    with FakeWhatsApp() as wa:
        async with listening(wa) as hook, httpx.AsyncClient() as http:
            answers = {}
            for name in forgeries(b""):
                _, body = text_delivery(f"forged with {name}")
                answers[name] = await post(http, hook.url, body, forgeries(body)[name])
            wamid, body = text_delivery("signed by Meta")
            under = await post(http, hook.url + "/more", body, sign(body, APP_SECRET))
            signed = await post(http, hook.url, body, sign(body, APP_SECRET))
    assert answers == dict.fromkeys(forgeries(b""), 403)
    assert under == 404  # Meta posts to /webhooks/whatsapp itself, nothing under it
    assert signed == 200  # answered once its admission committed
    assert hook.admissions.ids == [wamid]  # nothing of a refused delivery
    assert [e.text for e in hook.admissions.events] == ["signed by Meta"]
