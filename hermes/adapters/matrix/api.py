"""Matrix's client-server API as hermes speaks it: `{homeserver}/_matrix/client/v3/...`
with a bearer token, JSON in and out, errors as `{"errcode": "M_...", "error": ...}`.

A send is `PUT /rooms/{room}/send/{type}/{txnId}`, and the homeserver answers the same
transaction id (from the same device) with the same event, sending nothing twice: the
outbox row's idempotency key is the transaction id, so a send whose answer was lost can
go again safely. Tokens travel in headers only, never in a URL or an error message."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

import httpx

from hermes.actors.errors import HermesError
from hermes.adapters.base import AdapterFatal
from hermes.adapters.contract import RetryAfter, Sent
from hermes.adapters.http import HttpAnswer
from hermes.adapters.refusals import Codes, Refusal, retry_after

PREFIX = "/_matrix/client/v3/"
FATAL_AUTH = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_USER_DEACTIVATED"})
CODES = Codes(rate_limited=frozenset({"M_LIMIT_EXCEEDED"}), auth=FATAL_AUTH)


class MatrixError(HermesError):
    """The homeserver said no: `errcode` is Matrix's (M_FORBIDDEN, M_LIMIT_EXCEEDED...)."""

    def __init__(
        self, what: str, status: int, errcode: str, said: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(f"{what}: {status} {errcode}" + (f" ({said[:200]})" if said else ""))
        self.status = status
        self.errcode = errcode
        self.retry_after = retry_after  # a 429's wait, in seconds


def client_url(homeserver: str, *parts: str) -> str:
    """An endpoint's URL: each part percent-encoded whole (room ids carry `!` and `:`)."""
    return homeserver.rstrip("/") + PREFIX + "/".join(quote(p, safe="") for p in parts)


def txn_id(idempotency_key: str, edit: str | None = None) -> str:
    """The transaction id of an outbox row's send: the same for every try of it. An edit
    (`edit`: the text it shows) has its own per state: under the row's own id the
    homeserver would answer with the first send's event and show nothing."""
    key = idempotency_key if edit is None else f"{idempotency_key}\0edit\0{edit}"
    return "hermes-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def error_of(what: str, answer: HttpAnswer) -> MatrixError:
    body = answer.body if isinstance(answer.body, dict) else {}
    errcode = str(body.get("errcode") or "M_UNKNOWN")[:60]
    wait = retry_after(answer.headers, body.get("retry_after_ms"), ms=True)
    wait = wait if answer.status == 429 else None
    return MatrixError(what, answer.status, errcode, str(body.get("error") or ""), wait)


def sent_or_refusal(answer: HttpAnswer) -> Sent | RetryAfter | Refusal:
    """A send's answer: its event, or why not. Below 400 without an event id is a passing
    fault (the transaction id makes sending it again safe)."""
    body: dict[str, Any] = answer.body if isinstance(answer.body, dict) else {}
    if 200 <= answer.status < 300 and isinstance(body.get("event_id"), str):
        return Sent(body["event_id"])
    error = error_of("send", answer)
    if answer.status < 400:
        return RetryAfter(None, str(error))
    return refusal_of(error)


def refusal_of(error: MatrixError) -> Refusal:
    """A refusal on a send's way (the send's own, its upload's or its key share's)."""
    return Refusal(error.status, error.errcode, str(error), error.retry_after)


async def call(
    http: httpx.AsyncClient,
    base: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One call's JSON object (`path`: under the client API, `/` between its parts); a
    refused token is fatal, any other refusal a MatrixError."""
    url = client_url(base, *path.split("/"))
    response = await http.request(method, url, json=body, params=params)
    answer = HttpAnswer.of(response)
    if response.status_code == 200 and isinstance(answer.body, dict):
        return answer.body
    error = error_of(path, answer)
    if response.status_code == 401 or error.errcode in FATAL_AUTH:
        raise AdapterFatal(f"Matrix refused the token ({response.status_code} {error.errcode})")
    raise error


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object the homeserver (or anyone's event) sent, or {} for anything else."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
