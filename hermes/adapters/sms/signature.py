"""Twilio's request signature (`X-Twilio-Signature`): base64 of the HMAC-SHA1, under the
account's auth token, of the URL Twilio called (as configured, behind any proxy) followed
by each POST parameter's name and value, sorted by name. Sans-io."""

from __future__ import annotations

import base64
import hashlib
import hmac

HEADER = "x-twilio-signature"


def signature(url: str, params: list[tuple[str, str]], token: str) -> str:
    """The signature Twilio sends for a POST of `params` to `url`."""
    signed = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(token.encode(), signed.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def proven(header: str | None, url: str, params: list[tuple[str, str]], token: str) -> bool:
    """Whether `header` is the signature of this request, compared in constant time; none,
    or any other, is False."""
    if not header or not token:
        return False
    given = header.strip().encode("utf-8", "replace")
    return hmac.compare_digest(given, signature(url, params, token).encode())
