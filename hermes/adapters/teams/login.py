"""hermes's own access token for the Bot Framework's connector: the client-credentials
grant of Microsoft's identity platform (the app id and its client secret), kept until a
few minutes before it expires and fetched again at once when the connector refuses it
(`renew`). A secret the identity platform refuses (`invalid_client`: AADSTS7000215 a
wrong secret, AADSTS7000222 an expired one) is `SecretRefused`: the adapter goes fatal,
the reason in `hermes status`."""

from __future__ import annotations

import math

import httpx
import trio

SCOPE = "https://api.botframework.com/.default"
MULTI_TENANT = "botframework.com"
EARLY = 300.0  # seconds before its expiry a token is fetched again
LOGIN_SECONDS = 20.0  # the longest the identity platform may take to answer
REFUSALS = ("invalid_client", "unauthorized_client", "invalid_grant")


class SecretRefused(Exception):
    """The identity platform refused the app id or its secret: why, as it said."""


class Login:
    """One app's token, fetched when needed; one fetch at a time."""

    def __init__(
        self, http: httpx.AsyncClient, login_url: str, tenant: str | None, app_id: str, secret: str
    ) -> None:
        self.http = http
        self.url = f"{login_url.rstrip('/')}/{tenant or MULTI_TENANT}/oauth2/v2.0/token"
        self.form = {
            "grant_type": "client_credentials",
            "client_id": app_id,
            "client_secret": secret,
            "scope": SCOPE,
        }
        self.token: str | None = None
        self.until = -math.inf  # trio time it is used until
        self._lock = trio.Lock()

    async def current(self) -> str:
        """A token that is not about to expire."""
        if self.token is not None and trio.current_time() < self.until:
            return self.token
        return await self.renew(self.token)

    async def renew(self, refused: str | None) -> str:
        """A new token in place of `refused` (the connector said 401 to it); one that
        another send fetched meanwhile is taken as it is."""
        async with self._lock:
            if self.token is not None and self.token != refused:
                if trio.current_time() < self.until:
                    return self.token
            with trio.fail_after(LOGIN_SECONDS):  # a send or a connect waits on it
                response = await self.http.post(self.url, data=self.form)
            try:
                body = response.json()
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            if response.status_code in (400, 401) and body.get("error") in REFUSALS:
                said = str(body.get("error_description") or "").split("\r\n")[0][:300]
                raise SecretRefused(f"{response.status_code} {body['error']}: {said}")
            response.raise_for_status()
            token, lasts = body.get("access_token"), body.get("expires_in")
            if not isinstance(token, str) or not token:
                raise httpx.HTTPStatusError(
                    "no access_token in the answer", request=response.request, response=response
                )
            try:
                seconds = float(lasts)
            except (TypeError, ValueError):
                seconds = 3600.0
            self.token = token
            self.until = trio.current_time() + max(seconds - EARLY, seconds / 2)
            return token
