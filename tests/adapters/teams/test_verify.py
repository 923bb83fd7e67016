"""The signing keys' fetch is bounded: the adapter's actor waits on it while it checks a
delivery, so a metadata server that takes the request and never answers must not hold
every delivery behind it."""

from __future__ import annotations

import httpx
import pytest
import trio

from hermes.adapters.http import TIMEOUT
from hermes.adapters.teams.verify import FETCH_SECONDS, Keys, Refused


async def test_a_key_fetch_that_never_answers_ends_in_its_bound(autojump_clock):
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")  # takes, never answers
    port = listeners[0].socket.getsockname()[1]
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        keys = Keys(http, f"http://127.0.0.1:{port}/openid")
        started = trio.current_time()
        with pytest.raises(Refused, match="no signing key"):
            await keys.key("a-key-id-nobody-published")
        assert trio.current_time() - started == pytest.approx(FETCH_SECONDS, abs=1.0)
        with pytest.raises(ValueError, match="did not answer"):
            await keys.fetch()
    for listener in listeners:
        await listener.aclose()
