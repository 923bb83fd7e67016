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


def signed_urls(public_url: str, path: str = "") -> tuple[str, ...]:
    """The URLs a request to `path` under `public_url` may be signed over: `public_url`
    verbatim (a trailing slash, a `#rc=...` fragment of connection overrides and all, as
    typed in the Console), its path joined with `path`; and the same without the fragment
    (Twilio's documentation does not say whether the fragment is signed)."""
    base, hash_, fragment = public_url.partition("#")
    if path:
        base = f"{base.rstrip('/')}/{path}"
    return (f"{base}#{fragment}", base) if hash_ else (base,)


def proven(
    header: str | None, urls: tuple[str, ...], params: list[tuple[str, str]], token: str
) -> bool:
    """Whether `header` is the signature of this request over one of `urls`, compared in
    constant time; none, or any other, is False."""
    if not header or not token:
        return False
    given = header.strip().encode("utf-8", "replace")
    found = False
    for url in urls:
        found |= hmac.compare_digest(given, signature(url, params, token).encode())
    return found
