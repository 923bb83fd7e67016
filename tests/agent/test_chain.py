"""The provider chain against real fake servers: how often 429/5xx are retried, then fallback."""

from __future__ import annotations

import httpx
import pytest
import trio

from hermes.agent.chain import AllProvidersFailed, ProviderChain
from hermes.agent.openai_compat import OpenAICompatible
from tests.fakes.openai import FakeOpenAI, error_answer, text_answer

MESSAGES = [{"role": "user", "content": "hi"}]


async def prompt(provider) -> list[dict]:
    """The prompt the chain asks for before each provider (the same for both here)."""
    return MESSAGES


@pytest.fixture
def other():
    """A second fake server, for the provider the chain falls back to."""
    with FakeOpenAI() as server:
        yield server


def provider(name: str, model: str, url: str, key: str) -> OpenAICompatible:
    """A provider without HTTP timeouts: on a busy machine the mock clock may jump while a
    request is in flight, and only the chain's backoff sleeps should be waiting on it."""
    return OpenAICompatible(name, model, url, key, client=httpx.AsyncClient(timeout=None))


@pytest.fixture
async def providers(fake, other):
    a = provider("A", "model-a", fake.url, "sk-a")
    b = provider("B", "model-b", other.url, "sk-b")
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_two_429s_are_retried_and_the_third_answer_arrives(io_clock, fake, providers):
    """429, 429, 200: the default chain retries twice, with backoff, and returns the answer."""
    fake.script(error_answer(429, "slow down"), error_answer(429, "slow down"), text_answer("hi!"))
    start = trio.current_time()
    reply = await ProviderChain([providers[0]]).complete(prompt, [], None)
    assert (reply.content, reply.provider, reply.model) == ("hi!", "A", "model-a")
    assert len(fake.requests) == 3
    assert trio.current_time() - start >= 1 + 1  # jittered backoff: 1 s, then 1-2 s


async def test_three_503s_fall_back_after_exactly_three_requests(io_clock, fake, other, providers):
    """503 three times: two retries, then the next provider answers with its own model."""
    fake.script(*[error_answer(503, "overloaded")] * 3)
    fake.default = text_answer("A should not be asked a fourth time")
    other.script(text_answer("B here"))
    reply = await ProviderChain(list(providers)).complete(prompt, [], None)
    assert (reply.content, reply.provider, reply.model) == ("B here", "B", "model-b")
    assert len(fake.requests) == 3
    assert [r["body"]["model"] for r in other.requests] == ["model-b"]
    assert other.requests[0]["auth"] == "Bearer sk-b"


async def test_when_the_last_provider_keeps_failing_the_chain_fails(
    io_clock, fake, other, providers
):
    """Every provider retried to the end: AllProvidersFailed names each failure."""
    fake.script(*[error_answer(500, "a is down")] * 3)
    other.script(*[error_answer(429, "b is busy")] * 3)
    with pytest.raises(AllProvidersFailed) as failed:
        await ProviderChain(list(providers)).complete(prompt, [], None)
    assert "a is down" in str(failed.value) and "b is busy" in str(failed.value)
    assert (len(fake.requests), len(other.requests)) == (3, 3)
