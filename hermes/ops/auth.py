"""Who may use the operator surfaces, and which requests may change state.

The serve token opens everything: as `Authorization: Bearer <token>`, or through
the dashboard's login form, which sets a cookie derived from it (never the token
itself). Both are stateless: the cookie is a nonce and its HMAC under the token,
so a new serve.token logs every browser out. A state-changing POST also needs
the CSRF token of its session (an HMAC of the same nonce), which only a page that
could read our own JSON can know.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

COOKIE = "hermes_session"
CSRF_HEADER = "x-csrf-token"
BEARER = "bearer"  # the nonce of a request that showed the token itself


class Gate:
    def __init__(self, token: str) -> None:
        self._token = token
        self._key = token.encode()

    def _mac(self, purpose: str, nonce: str) -> str:
        return hmac.new(self._key, f"{purpose}:{nonce}".encode(), hashlib.sha256).hexdigest()

    def token_ok(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._key)

    def new_cookie(self) -> str:
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac('session', nonce)}"

    def nonce_of(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
        """The request's session nonce if it carries the token or a valid cookie, else None."""
        scheme, _, offered = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_ok(offered.strip()):
            return BEARER
        nonce, _, mac = cookies.get(COOKIE, "").partition(".")
        if nonce and nonce != BEARER and hmac.compare_digest(mac, self._mac("session", nonce)):
            return nonce
        return None

    def csrf(self, nonce: str) -> str:
        return self._mac("csrf", nonce)

    def csrf_ok(self, headers: Mapping[str, str], nonce: str) -> bool:
        return hmac.compare_digest(headers.get(CSRF_HEADER, ""), self.csrf(nonce))
