"""OpenAI's chat completions on the wire: the request hermes reads of a client, the
answers and stream chunks it writes back, the error shape, and the text a new
conversation starts with (the client's earlier messages, quoted before its last)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.actors.errors import HermesError

MAX_MESSAGES = 1_000  # messages one request may carry
SEED_CHARS = 32_000  # of a new conversation's earlier messages, the latest kept
MAX_USER = 256  # characters of the `user` field
LABELS = {"system": "system (your client's)", "developer": "system (your client's)"}
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class ApiError(HermesError):
    """A request answered with an error in OpenAI's shape: its HTTP status, `type`,
    `code` and the parameter it is about."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status, self.type, self.code, self.param = status, type_, code, param
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(str(self), self.type, self.code, self.param)


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


@attrs.frozen
class ChatRequest:
    """What hermes reads of a chat completions request: the model name the client chose
    (echoed back), the last message (the user's), the messages before it as (role, text),
    whether to stream, and the `user` field."""

    model: str
    last: str
    earlier: tuple[tuple[str, str], ...]
    stream: bool
    user: str | None


def parse(body: bytes) -> ChatRequest:
    """The request, or ApiError 400 naming what is wrong with it."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError(
            400, "model: a model name is required (any of GET /v1/models)", param="model"
        )
    stream = data.get("stream", False)
    if not isinstance(stream, bool | None):
        raise ApiError(400, "stream: must be true or false", param="stream")
    user = data.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > MAX_USER):
        raise ApiError(400, f"user: text of at most {MAX_USER} characters", param="user")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: a non-empty list is required", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ApiError(400, f"messages: at most {MAX_MESSAGES}", param="messages")
    said = [_message(n, m) for n, m in enumerate(messages)]
    role, last = said[-1]
    if role != "user" or not last.strip():
        raise ApiError(
            400, "messages: the last one must be the user's, with text", param="messages"
        )
    return ChatRequest(model, last, tuple(said[:-1]), bool(stream), user or None)


def _message(n: int, message: Any) -> tuple[str, str]:
    where = f"messages[{n}]"
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise ApiError(400, f"{where}: an object with a role of {sorted(ROLES)}", param=where)
    content = message.get("content")
    if content is None or isinstance(content, str):
        return message["role"], content or ""
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content: text or a list of parts", param=where)
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ApiError(
                400, f"{where}.content: only text parts are read, not {kind!r}", param=where
            )
        if not isinstance(part.get("text"), str):
            raise ApiError(400, f"{where}.content: a text part's text must be text", param=where)
        texts.append(part["text"])
    return message["role"], "\n".join(texts)


def seeded(earlier: tuple[tuple[str, str], ...], last: str) -> str:
    """A new conversation's first message: the client's earlier messages quoted (its
    system messages among them, as its own), the latest SEED_CHARS of them, then `last`.
    They are the client's word, quoted as the user's: not hermes's own messages."""
    lines: list[str] = []
    size = 0
    for role, text in reversed([m for m in earlier if m[1].strip()]):
        line = f"{LABELS.get(role, role)}: {text}"
        if size + len(line) > SEED_CHARS:
            lines.append("(earlier messages left out)")
            break
        lines.append(line)
        size += len(line)
    if not lines:
        return last
    block = "\n".join(reversed(lines))
    return (
        "(The conversation so far, as my client sent it:)\n"
        f"{block}\n(End of the conversation so far.)\n\n{last}"
    )


def completion(
    completion_id: str, model: str, created: int, text: str, finish: str = "stop"
) -> dict[str, Any]:
    """A whole answer (`stream: false`)."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
    }


def chunk(
    completion_id: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    """One piece of a streamed answer."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def models(names: list[str], created: int) -> dict[str, Any]:
    """GET /v1/models's answer."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "hermes"}
            for name in names
        ],
    }
