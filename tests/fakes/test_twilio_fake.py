"""The fake Twilio's own checks: its signature is Twilio's documented example's, its API
takes only the account's credentials and answers Twilio's errors, an incoming message's
media is behind the credentials and then a redirect, and what it delivers is signed over
the public URL while it reaches the local one."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.fakes.local_http import LocalServer
from tests.fakes.twilio import (
    ACCOUNT_SID,
    API_KEY_SECRET,
    API_KEY_SID,
    AUTH_TOKEN,
    NUMBER,
    PLAIN_URL,
    PUBLIC_URL,
    FakeTwilio,
    signature,
)

ACCOUNT = (ACCOUNT_SID, AUTH_TOKEN)


@pytest.fixture
def fake():
    with FakeTwilio() as running:
        yield running


def _send(fake: FakeTwilio, auth=ACCOUNT, **form: str) -> httpx.Response:
    url = f"{fake.url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
    return httpx.post(url, data={"From": NUMBER, **form}, auth=auth)


def test_the_signature_is_twilios_documented_example():
    params = [("CallSid", "CA1234567890ABCDE"), ("Caller", "+14158675310"), ("Digits", "1234"),
              ("From", "+14158675310"), ("To", "+18005551212")]  # fmt: skip
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert signature(url, params, "12345") == "GvWf1cFY/Q7PnoempGyD5oXAezc="


def test_sends_take_the_accounts_credentials_and_answer_twilios_errors(fake):
    taken = _send(fake, To="+15551230001", Body="hi")
    assert taken.status_code == 201 and taken.json()["sid"].startswith("SM")
    assert (
        _send(fake, (API_KEY_SID, API_KEY_SECRET), To="+15551230001", Body="k").status_code == 201
    )
    assert _send(fake, (ACCOUNT_SID, "wrong"), To="+1555", Body="x").json()["code"] == 20003
    assert _send(fake, To="5551230001", Body="x").json()["code"] == 21211
    assert _send(fake, To="+15551230001", Body="x" * 1601).json()["code"] == 21617
    fake.fail(429, 20429, retry_after=2)
    limited = _send(fake, To="+15551230001", Body="x")
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "2")
    assert [s["body"] for s in fake.sent] == ["hi", "k"]
    assert [r["status"] for r in fake.refused] == [401, 400, 400, 429]


def test_media_is_behind_the_credentials_then_a_signed_redirect(fake):
    sid = fake.message("look", media=[(b"PNG", "image/png")])  # no webhook_url: it waits
    url = fake.form(sid)["MediaUrl0"]
    assert httpx.get(url).status_code == 401
    redirected = httpx.get(url, auth=ACCOUNT)
    assert redirected.status_code == 307
    signed = httpx.get(redirected.headers["location"])
    assert (signed.content, signed.headers["content-type"]) == (b"PNG", "image/png")
    assert [f["authorized"] for f in fake.media_fetches] == [False, True]


class _Hermes(BaseHTTPRequestHandler):
    """Records each POST (its path, its headers, its form) and answers 200."""

    got: list[tuple[str, dict[str, str], str]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers["content-length"])).decode()
        with self.lock:
            self.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_deliveries_are_signed_over_the_public_url_and_reach_the_local_one(fake):
    server = LocalServer(_Hermes)
    server.start()
    try:
        fake.configure(webhook_url=f"{server.url}/webhooks/sms")
        sid = fake.message("hello", "+15551230002")
        fake.wait_delivered(sid)
        forged = fake.message("forged", "+15551230002", forge="url")
        fake.wait_delivered(forged)
        sent = _send(fake, To="+15551230002", Body="hi", StatusCallback=f"{PLAIN_URL}/status")
        [callback] = fake.wait_callbacks(1)
    finally:
        server.stop()
    (path, headers, body), (_, forged_headers, forged_body), (status_path, _, status) = _Hermes.got
    form = dict(httpx.QueryParams(body).multi_items())
    assert path == "/webhooks/sms" and form["Body"] == "hello" and form["From"] == "+15551230002"
    assert headers["x-twilio-signature"] == signature(PUBLIC_URL, list(form.items()), AUTH_TOKEN)
    forged_form = list(httpx.QueryParams(forged_body).multi_items())
    assert forged_headers["x-twilio-signature"] != signature(PUBLIC_URL, forged_form, AUTH_TOKEN)
    assert status_path == "/webhooks/sms/status" and "MessageStatus=delivered" in status
    assert callback["sid"] == sent.json()["sid"]


class _Failing(BaseHTTPRequestHandler):
    """Answers every POST 500, counting them."""

    posts = 0

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers["content-length"]))
        type(self).posts += 1
        self.send_response(500)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_5xx_is_tried_again_only_where_the_url_has_connection_overrides(fake):
    server = LocalServer(_Failing)
    server.start()
    try:
        fake.configure(webhook_url=f"{server.url}/webhooks/sms", public_url=PLAIN_URL,
                       retry_initial=0.01)  # fmt: skip
        plain = fake.message("once", "+15551230003")
        [tried] = fake.wait_attempts(plain, 1)
        fake.configure(public_url=f"{PLAIN_URL}#rc=2&rp=5xx")
        again = fake.message("thrice", "+15551230003")
        tries = fake.wait_attempts(again, 3)
    finally:
        server.stop()
    assert tried["status_code"] == 500 and len(fake.wait_attempts(plain, 1)) == 1
    assert [t["attempt"] for t in tries] == [1, 2, 3]
    assert _Failing.posts == 4
