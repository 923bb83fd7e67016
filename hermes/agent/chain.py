"""Providers in order of preference: retries with backoff, then fallback.

429 and 5xx are retried with exponential backoff (on the Trio clock); if
they persist, or the provider refuses the credentials (401/403) or cannot be
reached, the next provider answers, and its model goes with it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio
from prometheus_client import Counter

from hermes.actors.backoff import Backoff
from hermes.actors.errors import Unavailable
from hermes.agent.context import provider_key
from hermes.agent.provider import (
    FallbackError,
    ModelReply,
    OnText,
    Provider,
    ProviderError,
    Retryable,
)

log = logging.getLogger(__name__)

RETRIES = 2
BACKOFF = Backoff(minimum=1.0, maximum=30.0)  # jittered: fallbacks of many turns spread out

MODEL_CALLS = Counter(
    "hermes_model_calls", "Model calls by provider and outcome", ["provider", "outcome"]
)


class AllProvidersFailed(ProviderError, Unavailable):
    user_line = "no model provider could answer; try again in a while"


class ProviderChain:
    def __init__(
        self,
        providers: Sequence[Provider],
        retries: int = RETRIES,
        rng: random.Random | None = None,
    ) -> None:
        if not providers:
            raise ValueError("a provider chain needs at least one provider")
        self.providers = list(providers)
        self.retries = retries
        self.rng = rng or random.Random()

    def starting_with(self, key: str | None) -> ProviderChain:
        """This chain with the provider `key` ("name/model") first and the others after it
        in their order: a session's /model choice. Itself when `key` is None or unknown."""
        chosen = [p for p in self.providers if provider_key(p.name, p.model) == key]
        if not chosen or chosen[0] is self.providers[0]:
            return self
        rest = [p for p in self.providers if p is not chosen[0]]
        return ProviderChain([chosen[0], *rest], self.retries, self.rng)

    async def complete(
        self,
        prepare: Callable[[Provider], Awaitable[list[dict[str, Any]]]],
        tools: list[dict[str, Any]],
        on_text: OnText | None,
    ) -> ModelReply:
        """The first provider's answer that comes. `prepare(provider)` gives the prompt
        for each provider before it is called: a fallback with a smaller context
        window gets a prompt compacted for it."""
        failures = []
        for provider in self.providers:
            try:
                messages = await prepare(provider)
                return await self._with_retries(provider, messages, tools, on_text)
            except (FallbackError, Retryable) as exc:
                log.warning(
                    "provider %s/%s failed, trying the next: %s", provider.name, provider.model, exc
                )
                failures.append(str(exc))
        raise AllProvidersFailed("every provider failed: " + " | ".join(failures))

    async def _with_retries(
        self, provider: Provider, messages, tools, on_text: OnText | None
    ) -> ModelReply:
        attempt = 0
        while True:
            try:
                reply = await provider.complete(messages, tools, on_text)
            except Exception as exc:
                MODEL_CALLS.labels(provider.name, _outcome(exc)).inc()
                if not isinstance(exc, Retryable) or attempt >= self.retries:
                    raise
                attempt += 1
                delay = exc.retry_after or BACKOFF.delay(attempt, self.rng)
                log.info("provider %s: %s; retry %d in %.1fs", provider.name, exc, attempt, delay)
                await trio.sleep(delay)
                continue
            MODEL_CALLS.labels(provider.name, "ok").inc()
            return reply


def _outcome(exc: Exception) -> str:
    if isinstance(exc, Retryable):
        return "retryable"
    return "fallback" if isinstance(exc, FallbackError) else "failed"
