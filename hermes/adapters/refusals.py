"""A refused send, sans-io: each adapter reads its platform's answer into a `Refusal`
(status, the platform's own code, what it said, the wait it asked for), and one table
turns every platform's refusal into the contract's result the same way:

- a rate limit (HTTP 429, or the platform's word for one) waits as long as the platform
  said, else the outbox backs off;
- a refused token (401, or the platform's word) keeps the row: the adapter goes fatal
  with the reason in its status (`PlatformAdapter.refused`), and the row goes once the
  token is fixed and serve restarted; nothing is dead-lettered for it;
- a server error (5xx) or a passing fault the platform names waits and goes again;
- formatting the platform could not parse goes once more as plain text;
- an edit the message already shows is done, an edit whose message is gone is missing;
- anything else will never be sent: a dead letter.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from hermes.adapters.contract import Permanent, RetryAfter, SendResult, Sent

MAX_WAIT = 3600.0  # a wait asked for beyond this is read as this (an hour)


@attrs.frozen
class Refusal:
    """What the platform answered a send it did not take. `status`: the HTTP status (0
    where the platform speaks no HTTP: SMTP, signal-cli's JSON-RPC); `code`: the
    platform's own word (Slack's `error`, Matrix's `errcode`, Discord's numeric code, an
    SMTP reply code); `text`: what it said, as the row's reason shows it; `retry_after`:
    the wait it asked for, in seconds; `scope_wide`: the wait is for every chat
    (Discord's global limit)."""

    status: int
    code: str = ""
    text: str = ""
    retry_after: float | None = None
    scope_wide: bool = False

    @property
    def reason(self) -> str:
        return self.text or f"{self.status} {self.code}".strip()


@attrs.frozen
class Codes:
    """A platform's words for what every platform answers: each is matched against the
    refusal's `code` exactly and against its `text` as a phrase (lower case). HTTP's
    statuses need no entry (429, 401, 5xx)."""

    rate_limited: frozenset[str] = frozenset()
    auth: frozenset[str] = frozenset()
    passing: frozenset[str] = frozenset()  # try again later
    bad_format: frozenset[str] = frozenset()
    not_modified: frozenset[str] = frozenset()  # an edit: the message shows this already
    gone: frozenset[str] = frozenset()  # an edit: its message is gone or not editable


def _says(refusal: Refusal, words: frozenset[str]) -> bool:
    if refusal.code in words:
        return True
    text = refusal.text.lower()  # a phrase; a code (digits, CAPITALS, none) only as a code
    return any(w.lower() in text for w in words if w and not w.isdigit() and not w.isupper())


def is_auth(refusal: Refusal, codes: Codes) -> bool:
    """The platform refused the token (the adapter's to judge: it goes fatal)."""
    return refusal.status == 401 or _says(refusal, codes.auth)


def result_of(refusal: Refusal, codes: Codes, edit_of: str | None = None) -> SendResult:
    """The contract's result for `refusal` (of an edit of `edit_of`, when it is one)."""
    reason = refusal.reason
    if refusal.status == 429 or _says(refusal, codes.rate_limited):
        return RetryAfter(refusal.retry_after, reason, scope_wide=refusal.scope_wide)
    if is_auth(refusal, codes):
        return RetryAfter(None, reason)
    if refusal.status >= 500 or _says(refusal, codes.passing):
        return RetryAfter(None, reason)
    if _says(refusal, codes.bad_format):
        return Permanent(reason, formatting=True)
    if edit_of is not None:
        if _says(refusal, codes.not_modified):
            return Sent(edit_of)
        if _says(refusal, codes.gone):
            return Permanent(reason, missing=True)
    return Permanent(reason)


def retry_after(
    headers: Mapping[str, str], said: object = None, *, ms: bool = False
) -> float | None:
    """The wait a rate limit asked for, in seconds: `said` (the body's own field; in
    milliseconds when `ms`) when it is a number, else the Retry-After header's seconds;
    None when neither reads (the outbox then backs off). Never below 0, never above
    MAX_WAIT; an HTTP date in the header is not read (no platform hermes speaks sends one)."""
    for value, scale in ((said, 1000.0 if ms else 1.0), (headers.get("retry-after"), 1.0)):
        if value is None or isinstance(value, bool):
            continue
        try:
            seconds = float(value) / scale
        except (TypeError, ValueError):
            continue
        if seconds == seconds:  # not NaN
            return min(max(0.0, seconds), MAX_WAIT)
    return None
