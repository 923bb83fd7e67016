"""Reading Meta's deliveries: the signature over the raw body (any header refused
cleanly), malformed parts skipped rather than crashing, and a user's last-written time
that only moves forward."""

from __future__ import annotations

import hashlib
import hmac

from hermes.adapters.cursors import put_cursor
from hermes.adapters.signatures import signed
from hermes.adapters.whatsapp.inbound import messages
from tests.seed import rows, writing

SECRET = "app-secret"
BODY = b'{"object":"whatsapp_business_account"}'


def test_only_the_hmac_of_the_raw_body_under_the_app_secret_is_signed():
    good = "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    assert signed(BODY, good, SECRET)
    assert not signed(BODY + b" ", good, SECRET)  # another body
    assert not signed(BODY, good, "another-secret")
    for header in (None, "", "sha1=abc", "sha256=" + "0" * 64, "sha256=ünïcode"):
        assert not signed(BODY, header, SECRET)  # refused, never an error


def payload(**value) -> dict:
    value.setdefault("metadata", {"phone_number_id": "42"})
    return {"object": "whatsapp_business_account",
            "entry": [{"changes": [{"field": "messages", "value": value}]}]}  # fmt: skip


def test_a_malformed_delivery_is_skipped_part_by_part_never_a_crash():
    text = {"from": "491", "id": "wamid.1", "timestamp": "5", "type": "text",
            "text": {"body": "hi"}}  # fmt: skip
    odd = payload(contacts=[{"wa_id": "491", "profile": "not a dict"}, "junk"],
                  messages=[text, "junk", {"id": 7}])  # fmt: skip
    [found] = list(messages(odd, "whatsapp", "42"))
    assert (found.event.text, found.event.user_name, found.written_at) == ("hi", None, 5.0)
    for broken in ({"entry": "x"}, payload(messages="x"), payload(metadata="x"), [], None):
        assert list(messages(broken, "whatsapp", "42")) == []
    assert list(messages(payload(messages=[text]), "whatsapp", "another number")) == []


def test_the_time_a_user_last_wrote_only_moves_forward(db_path):
    with writing(db_path) as conn:
        put_cursor(conn, "whatsapp:window:491", "100.0", 1.0, rising=True)
        put_cursor(conn, "whatsapp:window:491", "50.0", 2.0, rising=True)  # redelivered, older
    assert rows(db_path, "SELECT value FROM adapter_cursors") == [("100.0",)]
    with writing(db_path) as conn:
        put_cursor(conn, "whatsapp:window:491", "150.0", 3.0, rising=True)
        put_cursor(conn, "other", "b", 3.0)
        put_cursor(conn, "other", "a", 4.0)  # a plain cursor is replaced, whatever it holds
    assert sorted(rows(db_path, "SELECT key, value FROM adapter_cursors")) == [
        ("other", "a"), ("whatsapp:window:491", "150.0")]  # fmt: skip
