"""What a send that raised an httpx error means: a request that never left (no
connection) goes again; one that may have reached the platform is Unconfirmed, so
a platform that does not deduplicate never gets it twice."""

from __future__ import annotations

import httpx

from hermes.adapters.contract import RetryAfter, SendResult, Unconfirmed

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def failed_send(exc: httpx.HTTPError) -> SendResult:
    if isinstance(exc, NOT_SENT):
        return RetryAfter(None, f"not sent: {type(exc).__name__}")
    return Unconfirmed(f"no answer: {type(exc).__name__}")
