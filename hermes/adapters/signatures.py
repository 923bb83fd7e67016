"""Webhook signatures: the HMAC-SHA256 of a delivery's raw body under a shared secret,
in a header, as Meta (WhatsApp), GitHub and most senders of webhooks sign theirs. One
check for every platform that is pushed to, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

HEX_PREFIX = "sha256="  # Meta's and GitHub's form: `sha256=<hex>`; a generic sender's is bare hex


def signed(body: bytes, header: str | None, secret: str, prefix: str = HEX_PREFIX) -> bool:
    """Whether `header` is `prefix` and the hex HMAC-SHA256 of the raw `body` under
    `secret` (either case), compared in constant time; any other header, none too, is
    False, never an error."""
    if not header or not secret or not header.startswith(prefix):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
    given = header[len(prefix) :].strip().lower().encode("utf-8", "replace")
    return hmac.compare_digest(given, expected)  # bytes: any header, never an error
