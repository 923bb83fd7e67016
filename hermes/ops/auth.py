"""Who may use the operator surfaces, and which requests may change state.

The serve token opens everything: as `Authorization: Bearer <token>`, or through
the dashboard's login form, which sets a cookie derived from it (never the token
itself). Both are stateless: the cookie is a nonce, its issue time and their HMAC
under the token, good for COOKIE_DAYS; a new serve.token logs every browser out.
A state-changing POST also needs the CSRF token of its session (an HMAC of the same
nonce), which only a page that could read our own JSON can know.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from hermes.actors.clock import Clock

COOKIE = "hermes_session"
CSRF_HEADER = "x-csrf-token"
BEARER = "bearer"  # the nonce of a request that showed the token itself
COOKIE_DAYS = 7
COOKIE_SECONDS = COOKIE_DAYS * 86400


def same(a: str, b: str) -> bool:
    """Timing-safe, and any text (a header may carry what ASCII comparison refuses)."""
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


class Gate:
    def __init__(self, token: str, clock: Clock) -> None:
        self.clock = clock  # a cookie's issue time and age
        self._token = token
        self._key = token.encode()

    def _mac(self, purpose: str, nonce: str) -> str:
        return hmac.new(self._key, f"{purpose}:{nonce}".encode(), hashlib.sha256).hexdigest()

    def token_ok(self, offered: str) -> bool:
        return same(offered, self._token)

    def new_cookie(self) -> str:
        nonce = f"{secrets.token_urlsafe(16)}-{int(self.clock.now())}"
        return f"{nonce}.{self._mac('session', nonce)}"

    def nonce_of(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
        """The request's session nonce if it carries the token or a valid cookie, else None."""
        scheme, _, offered = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_ok(offered.strip()):
            return BEARER
        nonce, _, mac = cookies.get(COOKIE, "").partition(".")
        if not nonce or nonce == BEARER or not same(mac, self._mac("session", nonce)):
            return None
        issued = nonce.rpartition("-")[2]
        if not issued.isdigit() or self.clock.now() - int(issued) > COOKIE_SECONDS:
            return None  # expired: log in again
        return nonce

    def csrf(self, nonce: str) -> str:
        return self._mac("csrf", nonce)

    def csrf_ok(self, headers: Mapping[str, str], nonce: str) -> bool:
        return same(headers.get(CSRF_HEADER, ""), self.csrf(nonce))
