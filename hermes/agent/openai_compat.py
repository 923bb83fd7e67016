"""OpenAI-compatible chat completions over httpx: streaming (SSE) and not, with tool calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from hermes.adapters.refusals import retry_after
from hermes.agent.provider import (
    AuthFailed,
    ModelReply,
    OnText,
    ProviderError,
    Retryable,
    ToolCall,
    Unreachable,
)

TIMEOUT = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=10.0)
DEFAULT_CONTEXT = 128_000  # tokens, when config.yaml does not say (context_tokens)


class OpenAICompatible:
    """One provider and model. The API key is passed in, never logged."""

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None,
        client: httpx.AsyncClient | None = None,
        context_tokens: int = DEFAULT_CONTEXT,
        image_px: int | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.context_tokens = context_tokens
        self.image_px = image_px  # set: a multimodal model, sent images this large at most
        self.url = httpx.URL(base_url.rstrip("/") + "/chat/completions")  # parsed once
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT)
        self._tools: tuple[list[dict[str, Any]], bytes] | None = None  # see _encoded

    def __repr__(self) -> str:
        return f"<OpenAICompatible {self.name}:{self.model}>"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: OnText | None
    ) -> ModelReply:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if on_text is not None:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        try:
            content = _json(body)
            if tools:  # the role's schemas, encoded once: most of a short turn's body
                content = content[:-1] + b',"tools":' + self._encoded(tools) + b"}"
            async with self._client.stream(
                "POST", self.url, content=content, headers=self._headers
            ) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise self._status_error(response)
                if on_text is None:
                    return self._parse(json.loads(await response.aread()))
                return await self._parse_stream(response, on_text)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise Unreachable(f"{self.name}: cannot reach {self.url}: {exc}") from exc
        except httpx.RemoteProtocolError as exc:
            raise Retryable(f"{self.name}: the connection broke: {exc}") from exc
        except httpx.ReadTimeout as exc:
            raise Retryable(f"{self.name}: no answer within {TIMEOUT.read:g}s") from exc

    def _encoded(self, tools: list[dict[str, Any]]) -> bytes:
        """`tools` as JSON, kept for the next request that offers the same list (a role's
        schemas are one list for the agent's life; MCP servers' changes make a new one)."""
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, _json(tools))
        return self._tools[1]

    def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        detail = response.text[:300]
        message = f"{self.name} ({self.model}) answered {status}: {detail}"
        if status in (401, 403):
            return AuthFailed(message)
        if status == 429 or status >= 500:
            return Retryable(message, retry_after(response.headers))
        return ProviderError(message)

    def _parse(self, data: dict[str, Any]) -> ModelReply:
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ProviderError(f"{self.name}: a reply without choices: {data!r:.200}") from exc
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "{}")
            for c in message.get("tool_calls") or ()
        )
        usage = data.get("usage") or {}
        return ModelReply(
            message.get("content"),
            calls,
            self.name,
            self.model,
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
        )

    async def _parse_stream(self, response: httpx.Response, on_text: OnText) -> ModelReply:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: dict[str, int] = {}
        async for line in _lines(response):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue  # read to the end: a body read whole lets the connection be reused
            chunk = json.loads(payload)
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                    await on_text(delta["content"])
                for part in delta.get("tool_calls") or ():
                    call = calls.setdefault(
                        part.get("index", 0), {"id": "", "name": "", "args": ""}
                    )
                    call["id"] = part.get("id") or call["id"]
                    function = part.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["args"] += function.get("arguments") or ""
        tool_calls = tuple(
            ToolCall(c["id"], c["name"], c["args"] or "{}") for _, c in sorted(calls.items())
        )
        return ModelReply(
            "".join(text) or None,
            tool_calls,
            self.name,
            self.model,
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
        )


async def _lines(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's lines as bytes, as they come: the events of a stream are JSON, which
    reads bytes, so no text decoding is spent on them."""
    rest = b""
    async for data in response.aiter_bytes():
        *lines, rest = (rest + data).split(b"\n")
        for line in lines:
            yield line
    if rest:
        yield rest


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
