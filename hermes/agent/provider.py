"""What the loop needs from a model provider, and the errors that steer fallback."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

from hermes.actors.errors import HermesError, Unavailable


@attrs.frozen
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it

    def parsed(self) -> dict[str, Any]:
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@attrs.frozen
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    provider: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


class ProviderError(HermesError):
    """A provider failed in a way that neither a retry nor a fallback will fix.

    Its message (the provider's URL, status and body) is for the log; a chat user
    reads only `user_line`."""

    user_line = "the model provider answered with an error"


class FallbackError(ProviderError):
    """Move to the next provider: credentials refused, or the host cannot be reached."""


class AuthFailed(FallbackError):
    user_line = "the model provider refused hermes's credentials"


class Unreachable(FallbackError, Unavailable):
    user_line = "the model provider cannot be reached"


class Retryable(ProviderError, Unavailable):
    """Worth another try after a backoff (429, 5xx); after the retries, fall back."""

    user_line = "the model provider is busy or failing; try again in a while"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


OnText = Callable[[str], Awaitable[None]]
"""Takes each piece of a streamed reply; awaited, so a slow consumer slows the stream."""


class Provider(Protocol):
    name: str
    model: str
    context_tokens: int  # the model's context window, in tokens
    image_px: int | None  # the longest side of an image it is sent; None: it sees none

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: OnText | None
    ) -> ModelReply:
        """One model call. With `on_text` the reply is streamed and each piece of
        text is passed to it as it arrives."""
