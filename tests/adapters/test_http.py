"""The lean JSON requests of the HTTP adapters keep the client's connect bound."""

from __future__ import annotations

import socket

import httpx
import pytest
import trio

from hermes.adapters.http import CONNECT_TIMEOUT, TIMEOUT, JsonRequests


@pytest.fixture
def unanswered():
    """A listener whose accept queue is full: a new connection is never taken."""
    with socket.socket() as listener, socket.socket() as first:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        first.connect(listener.getsockname())  # fills the queue; nothing accepts it
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/bot/sendMessage"


async def test_a_request_that_cannot_connect_fails_at_the_connect_bound(unanswered, autojump_clock):
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        started = trio.current_time()
        with pytest.raises(httpx.ConnectTimeout):
            await client.send(JsonRequests(client).post(unanswered, {"text": "hi"}))
        assert trio.current_time() - started == pytest.approx(CONNECT_TIMEOUT)


async def test_a_long_poll_bounds_every_phase_by_its_own_timeout(unanswered, autojump_clock):
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        started = trio.current_time()
        with pytest.raises(httpx.ConnectTimeout):
            await client.send(JsonRequests(client).post(unanswered, {}, timeout=3.0))
        assert trio.current_time() - started == pytest.approx(3.0)
