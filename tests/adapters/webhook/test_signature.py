"""The one HMAC-SHA256 check of webhook deliveries, in both forms routes take: GitHub's
`sha256=<hex>` and the generic bare hex; any header that is not the right one is False,
never an error."""

from __future__ import annotations

import hashlib
import hmac

from hermes.adapters.signatures import HEX_PREFIX, signed

SECRET = "route-secret"
BODY = b'{"action":"opened"}'
HEX = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()


def test_githubs_form_is_the_prefixed_hex_of_the_raw_body():
    assert signed(BODY, f"sha256={HEX}", SECRET, HEX_PREFIX)
    assert signed(BODY, f"sha256={HEX.upper()}", SECRET, HEX_PREFIX)  # hex in either case
    assert not signed(BODY, HEX, SECRET, HEX_PREFIX)  # the prefix is part of the form
    assert not signed(BODY + b"\n", f"sha256={HEX}", SECRET, HEX_PREFIX)  # another body
    assert not signed(BODY, f"sha256={HEX}", "another-secret", HEX_PREFIX)


def test_the_generic_form_is_the_bare_hex():
    assert signed(BODY, HEX, SECRET, "")
    assert signed(BODY, f" {HEX} ", SECRET, "")
    assert not signed(BODY, f"sha256={HEX}", SECRET, "")
    assert not signed(BODY, HEX[:-1], SECRET, "")


def test_anything_else_is_refused_cleanly():
    for header in (None, "", "sha1=abc", "sha256=", "sha256=" + "0" * 64, "sha256=ünïcode"):
        assert not signed(BODY, header, SECRET, HEX_PREFIX)
        assert not signed(BODY, header, SECRET, "")
    assert not signed(BODY, f"sha256={HEX}", "", HEX_PREFIX)  # no secret: nothing is signed
