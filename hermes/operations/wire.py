"""Operator actions as JSON: arguments in, results and errors out, and back again.

JSON-RPC and the dashboard answer with `result_to_json`; the CLI, when it asked a
running serve, reads the answer back into the action's own result type, and an
error back into its family, so every surface shows the same result and the same
error for the same input.
"""

from __future__ import annotations

from typing import Any

import cattrs

from hermes.actors.errors import HermesError, Invalid, NotFound, Throttled, Unavailable
from hermes.config import InputError, structure
from hermes.operations.catalog import every, find
from hermes.operations.context import Operation

_results = cattrs.Converter()

# The families a caller tells apart, most specific first.
FAMILIES: dict[str, type[HermesError]] = {
    "not_found": NotFound,
    "invalid": Invalid,
    "throttled": Throttled,
    "unavailable": Unavailable,
}


class UnknownAction(NotFound):
    """No operator action has this name."""


class BadArguments(Invalid):
    """The arguments do not fit the action; the message names each bad one."""


def operation(name: str) -> Operation:
    found = find(name)
    if found is None:
        raise UnknownAction(f"no action {name!r} ({', '.join(sorted(every()))})")
    return found


def parse_args(op: Operation, params: Any) -> Any:
    """`params` (parsed JSON) as the action's arguments, strictly (no coercion)."""
    try:
        return structure({} if params is None else params, op.args)
    except InputError as exc:
        raise BadArguments(f"{op.name}: {exc}") from None


def result_to_json(result: Any) -> Any:
    return _results.unstructure(result)


def result_from_json(op: Operation, data: Any) -> Any:
    return _results.structure(data, op.result)


def family_of(exc: HermesError) -> str:
    for name, family in FAMILIES.items():
        if isinstance(exc, family):
            return name
    return "failed"


def error_to_json(exc: HermesError) -> dict[str, str]:
    return {"family": family_of(exc), "type": type(exc).__name__}


class RemoteError(HermesError):
    """An error serve raised for an action the CLI sent it; `kind` is its class's name."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class RemoteInvalid(RemoteError, Invalid):
    pass


class RemoteNotFound(RemoteError, NotFound):
    pass


class RemoteThrottled(RemoteError, Throttled):
    pass


class RemoteUnavailable(RemoteError, Unavailable):
    pass


_REMOTE: dict[str, type[RemoteError]] = {
    "not_found": RemoteNotFound,
    "invalid": RemoteInvalid,
    "throttled": RemoteThrottled,
    "unavailable": RemoteUnavailable,
}


def error_from_json(message: str, data: Any) -> RemoteError:
    """The error serve answered, of the same family as the one raised there (so the CLI
    handles it as it would the same error raised here)."""
    data = data if isinstance(data, dict) else {}
    kind = str(data.get("type", "HermesError"))
    return _REMOTE.get(str(data.get("family")), RemoteError)(message, kind)
