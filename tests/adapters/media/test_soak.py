"""A soak of media through `hermes serve`: 200 attachments of 5 MB in one session. Each
is streamed to the cache in pieces (never held whole), so serve's memory stays where it
was, and the cache stays within its cap however much came."""

from __future__ import annotations

import psutil
import pytest

from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN
from tests.fakes.openai import text_answer

FILES, SIZE = 200, 5 * 1024 * 1024
BATCH = 10
CAP_MB = 60


def _cache_bytes(home) -> int:
    return sum(p.stat().st_size for p in (home.cache / "telegram").iterdir())


@pytest.mark.long
@pytest.mark.timeout(300)
@pytest.mark.parametrize("chat", ["telegram"], indirect=True)
async def test_200_attachments_of_5_mb_leave_rss_and_the_cache_within_bounds(
    serve, model, chat, home
):
    serve.configure(
        top=f"media:\n  cache_mb: {CAP_MB}\n  per_chat_hour_mb: 2000\n",
        gateway="  busy: queue\n",
    )  # each message a turn of its own, in turn
    model.default = text_answer("filed")
    proc = serve.start()
    content = bytes(range(256)) * (SIZE // 256)  # one object: the fake keeps no copies
    start = 0
    for first in range(0, FILES, BATCH):  # a session queues 16 turns at most
        for i in range(first, first + BATCH):
            file_id = chat.fake.add_file(content, file_name=f"scan{i}.pdf",
                                         mime_type="application/pdf")  # fmt: skip
            chat.fake.message(f"file {i}", user_id=ANN, document=file_id)
        await in_thread(model.wait_requests, first + BATCH, 60.0)
        if first == 0:  # the first turns grow serve's pools once (clients, buffers)
            start = psutil.Process(proc.pid).memory_info().rss
    end = psutil.Process(proc.pid).memory_info().rss
    serve.kill()  # the answers still wait for Telegram's pace of one a second a chat
    assert len(chat.fake.downloads) == FILES
    assert (end - start) / 2**20 < 30, f"RSS grew {(end - start) / 2**20:.1f} MB"
    assert _cache_bytes(home) <= CAP_MB * 2**20
    asked = model.requests[-1]["body"]["messages"][-1]["content"]
    assert f"(application/pdf, {SIZE} bytes" in asked
