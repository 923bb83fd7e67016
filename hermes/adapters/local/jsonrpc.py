"""JSON-RPC 2.0 framing: parse a request, shape results, errors and notifications."""

from __future__ import annotations

import json
from typing import Any

import attrs

from hermes.actors.errors import HermesError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000  # draining, or a turn could not be started


class RpcError(HermesError):
    """A JSON-RPC error to answer a request with: its code, message and data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


@attrs.frozen
class Request:
    method: str
    params: dict[str, Any]
    id: Any  # None for a notification


def parse(text: str) -> Request:
    try:
        msg = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RpcError(PARSE_ERROR, f"not valid JSON: {exc}") from None
    except RecursionError:  # the parser's own bound on nesting; the connection lives on
        raise RpcError(PARSE_ERROR, "not valid JSON: nested too deeply") from None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'a request is an object with "jsonrpc": "2.0"')
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, '"method" must be a non-empty string')
    params = msg.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, '"params" must be an object')
    return Request(method, params, msg.get("id"))


def result(request_id: Any, value: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: Any, exc: RpcError) -> str:
    body: dict[str, Any] = {"code": exc.code, "message": str(exc)}
    if exc.data is not None:
        body["data"] = exc.data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": body})


def notification(method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params})
