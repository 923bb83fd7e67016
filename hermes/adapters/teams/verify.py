"""Every request Teams sends is proven by the JWT in its Authorization header, checked as
the Bot Framework's authentication documents it before anything else of the request is
read: signed (RS256) with a key the OpenID metadata publishes, by the Bot Framework
(`iss`), for this bot (`aud`: the app id), not expired (nor not yet valid) within five
minutes of skew; the key endorses the activity's channel (`msteams`), and the token's
`serviceurl` claim (so spelled) is the activity's. The keys are kept and fetched again
once a day, or when a token names a key id not known: at most once a minute for that, so
a forger who names new key ids costs one fetch a minute (of at most FETCH_SECONDS),
nothing more."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import httpx
import jwt
import trio

from hermes.adapters.http import read_capped

log = logging.getLogger(__name__)

ISSUER = "https://api.botframework.com"
SKEW = 300  # seconds of clock difference allowed on exp and nbf
KEPT = 24 * 3600.0  # keys are fetched again after this
UNKNOWN_GAP = 60.0  # at least this long between two fetches for an unknown key id
MAX_METADATA = 256 * 1024  # bytes of metadata or keys read
FETCH_SECONDS = 10.0  # the longest a fetch of the metadata or the keys may take


class Refused(Exception):
    """The request is not proven: why (for the log; the answer is 401 whatever it is)."""


@attrs.frozen
class Key:
    """A signing key and the channels it endorses."""

    key: Any
    endorsements: frozenset[str]


class Keys:
    """The Bot Framework's signing keys by id, fetched from `openid_url`'s `jwks_uri`."""

    def __init__(self, http: httpx.AsyncClient, openid_url: str) -> None:
        self.http = http
        self.openid_url = openid_url
        self.keys: dict[str, Key] = {}
        self.fetched_at = -float("inf")  # trio time of the last fetch
        self.unknown_at = -float("inf")  # of the last fetch for an unknown key id
        self._lock = trio.Lock()

    async def fetch(self, unless_since: float | None = None) -> None:
        """The metadata, then the keys it names (not again when a fetch ended after
        `unless_since` while this one waited); network errors and a 4xx pass through."""
        async with self._lock:
            if unless_since is not None and self.fetched_at > unless_since:
                return
            metadata = await self._json(self.openid_url)
            uri = metadata.get("jwks_uri") if isinstance(metadata, dict) else None
            if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
                raise ValueError("the OpenID metadata names no jwks_uri")
            found = await self._json(uri)
            keys: dict[str, Key] = {}
            for jwk in found.get("keys", []) if isinstance(found, dict) else []:
                try:
                    endorsed = frozenset(str(e) for e in jwk.get("endorsements") or ())
                    keys[str(jwk["kid"])] = Key(jwt.PyJWK(jwk, "RS256").key, endorsed)
                except (jwt.PyJWKError, KeyError, TypeError, AttributeError):
                    continue  # a key of another kind, or none: not ours to use
            self.keys = keys
            self.fetched_at = trio.current_time()

    async def _json(self, url: str) -> Any:
        """`url`'s JSON, capped, within FETCH_SECONDS (the actor waits on it: a server that
        never answers must not hold every delivery behind it)."""
        try:
            with trio.fail_after(FETCH_SECONDS):
                async with self.http.stream("GET", url) as response:
                    response.raise_for_status()
                    body = await read_capped(response, MAX_METADATA)
        except trio.TooSlowError:
            raise ValueError(f"{url} did not answer in {FETCH_SECONDS:g} s") from None
        if body is None:
            raise ValueError(f"{url} answered more than {MAX_METADATA} bytes")
        return json.loads(body)

    async def key(self, kid: str) -> Key:
        """The key `kid` names: fetched again when the kept ones are a day old, or once a
        minute at most when none has that id."""
        now = trio.current_time()
        if now - self.fetched_at > KEPT:
            await self._refetch(now)
        elif kid not in self.keys and now - self.unknown_at >= UNKNOWN_GAP:
            self.unknown_at = now
            await self._refetch(now)
        found = self.keys.get(kid)
        if found is None:
            raise Refused(f"no signing key {kid[:40]!r}")
        return found

    async def _refetch(self, asked_at: float) -> None:
        try:
            await self.fetch(asked_at)
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("the Bot Framework's signing keys could not be fetched: %r", exc)
            self.fetched_at = trio.current_time() - KEPT + UNKNOWN_GAP  # again in a minute


def token_of(authorization: str | None) -> str:
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Refused("no bearer token")
    return authorization[7:].strip()


async def claims(keys: Keys, authorization: str | None, app_id: str) -> dict[str, Any]:
    """The verified claims of a request's token, and the key that signed it; Refused."""
    token = token_of(authorization)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise Refused(f"not a JWT: {exc}") from None
    if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str):
        raise Refused("not signed with RS256 under a key id")
    key = await keys.key(header["kid"])
    try:
        found = jwt.decode(
            token,
            key.key,
            algorithms=["RS256"],
            audience=app_id,
            issuer=ISSUER,
            leeway=SKEW,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.PyJWTError as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from None
    return {**found, "_endorsements": key.endorsements}


def matches(verified: dict[str, Any], activity: dict[str, Any]) -> None:
    """The activity is the one the token was issued for: its channel endorsed by the key,
    its serviceUrl the token's; Refused."""
    channel = activity.get("channelId")
    if not isinstance(channel, str) or channel not in verified["_endorsements"]:
        raise Refused(f"the key does not endorse the channel {str(channel)[:40]!r}")
    if verified.get("serviceurl") != activity.get("serviceUrl"):  # the claim's own spelling
        raise Refused("the activity's serviceUrl is not the token's")
