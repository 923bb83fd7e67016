"""The gate of the operator surfaces: the token, the login cookie and its lifetime, and
the CSRF token of a session."""

from __future__ import annotations

from hermes.actors.clock import Clock
from hermes.ops.auth import BEARER, COOKIE, COOKIE_SECONDS, Gate

TOKEN = "s3cret-token"


async def test_the_token_opens_and_a_cookie_is_derived_from_it_not_the_token():
    gate = Gate(TOKEN, Clock())
    assert gate.nonce_of({"authorization": f"Bearer {TOKEN}"}, {}) == BEARER
    assert gate.nonce_of({"authorization": "Bearer nope"}, {}) is None
    cookie = gate.new_cookie()
    assert TOKEN not in cookie
    nonce = gate.nonce_of({}, {COOKIE: cookie})
    assert nonce is not None and nonce != BEARER
    assert Gate("another token", Clock()).nonce_of({}, {COOKIE: cookie}) is None  # a new token: out


async def test_a_cookie_expires_and_a_forged_or_odd_one_is_refused_without_an_error():
    issued = Gate(TOKEN, Clock(1_700_000_000.0)).new_cookie()
    gate = Gate(TOKEN, Clock(1_700_000_000.0 + COOKIE_SECONDS - 60))
    assert gate.nonce_of({}, {COOKIE: issued}) is not None  # a minute before it expires
    gate = Gate(TOKEN, Clock(1_700_000_000.0 + COOKIE_SECONDS + 60))
    assert gate.nonce_of({}, {COOKIE: issued}) is None
    nonce, _, mac = gate.new_cookie().partition(".")
    assert gate.nonce_of({}, {COOKIE: f"{nonce}x.{mac}"}) is None
    assert gate.nonce_of({}, {COOKIE: f"{BEARER}.{mac}"}) is None
    assert gate.nonce_of({}, {COOKIE: "a.\xe9"}) is None  # not ASCII: refused, no TypeError
    assert gate.nonce_of({"authorization": "Bearer \xe9"}, {}) is None


async def test_csrf_belongs_to_its_session():
    gate = Gate(TOKEN, Clock())
    one = gate.nonce_of({}, {COOKIE: gate.new_cookie()})
    two = gate.nonce_of({}, {COOKIE: gate.new_cookie()})
    assert gate.csrf_ok({"x-csrf-token": gate.csrf(one)}, one)
    assert not gate.csrf_ok({"x-csrf-token": gate.csrf(two)}, one)
    assert not gate.csrf_ok({}, one)
    assert not gate.csrf_ok({"x-csrf-token": "\xe9"}, one)
