"""Twilio signs the webhook URL exactly as typed in the Console: a trailing slash, and a
fragment of connection overrides, are part of what hermes checks the signature over."""

from __future__ import annotations

import pytest

from hermes.adapters.sms.signature import proven, signed_urls
from tests.fakes.twilio import AUTH_TOKEN, signature

FORM = [("MessageSid", "SM1"), ("From", "+15551230001"), ("Body", "hi")]


@pytest.mark.parametrize(
    ("public", "path", "signed"),
    [
        ("https://h.test/webhooks/sms", "", "https://h.test/webhooks/sms"),
        ("https://h.test/webhooks/sms/", "", "https://h.test/webhooks/sms/"),
        ("https://h.test/webhooks/sms", "status", "https://h.test/webhooks/sms/status"),
        ("https://h.test/webhooks/sms/", "status", "https://h.test/webhooks/sms/status"),
        ("https://h.test/sms/#rc=3&rp=all", "", "https://h.test/sms/#rc=3&rp=all"),
        ("https://h.test/sms/#rc=3&rp=all", "", "https://h.test/sms/"),
        ("https://h.test/sms/#rc=3&rp=all", "status", "https://h.test/sms/status#rc=3&rp=all"),
    ],
)
def test_a_signature_over_the_url_as_typed_is_proven(public, path, signed):
    header = signature(signed, FORM, AUTH_TOKEN)
    assert proven(header, signed_urls(public, path), FORM, AUTH_TOKEN)


@pytest.mark.parametrize(
    ("public", "signed"),
    [
        ("https://h.test/webhooks/sms/", "https://h.test/webhooks/sms"),  # not what Twilio signs
        ("https://h.test/webhooks/sms", "https://h.test/webhooks/sms/"),
        ("https://h.test/webhooks/sms", "https://other.test/webhooks/sms"),
    ],
)
def test_a_signature_over_another_url_is_not(public, signed):
    assert not proven(signature(signed, FORM, AUTH_TOKEN), signed_urls(public), FORM, AUTH_TOKEN)
