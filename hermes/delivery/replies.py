"""How the gateway answers: the one narrow way a reply leaves hermes.

The router knows only this interface: `progress` for the steps of a turn (an
adapter that shows progress, the local endpoint, streams them) and `answer`
for what the user is sent. `DirectReplies` sends each answer straight
through the platform's adapter; the outbox takes its place without the
router noticing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from hermes.actors.address import Address
from hermes.actors.errors import ActorStopped
from hermes.adapters.contract import (
    InboundEvent,
    Permanent,
    RetryAfter,
    Send,
    SendRequest,
    Target,
    TurnEvent,
)

log = logging.getLogger(__name__)


class Replies(Protocol):
    async def progress(self, event: TurnEvent) -> None:
        """A step of a turn, in order; lost when its adapter is down."""

    async def answer(
        self, source: InboundEvent | None, target: Target, text: str, key: str
    ) -> None:
        """Send `text` to `target` (in reply to `source`, if any); `key` is stable for
        this answer across retries and restarts."""


class DirectReplies:
    """Answers sent at once through the adapter; a failure is logged, not retried."""

    def __init__(self, adapter_of: Callable[[str], Address | None]) -> None:
        self.adapter_of = adapter_of

    async def progress(self, event: TurnEvent) -> None:
        adapter = self.adapter_of(event.target.platform)
        if adapter is None:
            return
        try:
            await adapter.cast(event)
        except ActorStopped:
            pass

    async def answer(
        self, source: InboundEvent | None, target: Target, text: str, key: str
    ) -> None:
        adapter = self.adapter_of(target.platform)
        if adapter is None:
            log.warning("no adapter for %s: an answer to %s is not sent", target.platform, target)
            return
        reply_to = source.message_id if source is not None else None
        request = SendRequest(target, text, key, reply_to=reply_to)
        try:
            result = await adapter.call(Send(request))
        except ActorStopped:
            log.warning("the %s adapter stopped: an answer to %s is not sent", target.platform,
                        target)  # fmt: skip
            return
        if isinstance(result, RetryAfter | Permanent):
            log.warning("an answer to %s was not sent: %s", target, result.reason)
