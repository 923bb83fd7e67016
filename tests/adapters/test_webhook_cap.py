"""The webhook listener reads a body only up to `gateway.webhooks.max_body`, however it is
framed: a chunked body, which states no Content-Length, is cut off past the cap with 413
and never handed to the platform's adapter (here WhatsApp's, in this process, behind the
real listener on a socket), even when it is a delivery Meta signed."""

from __future__ import annotations

import httpx
import pytest
import trio

from tests.adapters.whatsapp.listener import listening, text_delivery
from tests.fakes.whatsapp import APP_SECRET, SIGNATURE_HEADER, FakeWhatsApp, sign

MAX_BODY = 1024  # the least gateway.webhooks.max_body takes


async def chunked_post(port: int, body: bytes, signature: str, piece: int = 1000) -> bytes:
    """POST `body` to WhatsApp's webhook in chunks of `piece` bytes, with no Content-Length
    (HTTP/1.1 chunked transfer coding); the answer, as the socket gave it."""
    head = (
        f"POST /webhooks/whatsapp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n{SIGNATURE_HEADER}: {signature}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    request = head.encode()
    for start in range(0, len(body), piece):
        chunk = body[start : start + piece]
        request += f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    request += b"0\r\n\r\n"
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        answer = b""
        while received := await stream.receive_some():
            answer += received
    return answer


@pytest.mark.timeout(60)
async def test_a_chunked_body_past_the_cap_is_413_and_never_handed_on():
    with FakeWhatsApp() as wa:
        async with listening(wa, max_body=MAX_BODY) as hook:
            large, body = text_delivery("x" * (3 * MAX_BODY))
            assert len(body) > 3 * MAX_BODY
            answer = await chunked_post(hook.port, body, sign(body, APP_SECRET))
            small, within = text_delivery("a few words")  # under the cap, chunked too
            taken = await chunked_post(hook.port, within, sign(within, APP_SECRET))
            async with httpx.AsyncClient() as http:  # and with its Content-Length
                again, plain = text_delivery("a few more words")
                headers = {"content-type": "application/json",
                           SIGNATURE_HEADER: sign(plain, APP_SECRET)}  # fmt: skip
                stated = await http.post(hook.url, content=plain, headers=headers)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert taken.startswith(b"HTTP/1.1 200 "), taken[:200]
    assert stated.status_code == 200
    assert hook.admissions.ids == [small, again]  # the large one never reached admission
    assert large not in hook.admissions.ids
