"""Self-tests of the fake WhatsApp Cloud API (tests/fakes/whatsapp.py), driven with httpx
synchronously against a tiny webhook receiver standing in for hermes's listener; the
tests wait on the fake's and the receiver's conditions, never by sleeping."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.fakes.kit import wait
from tests.fakes.local_http import LocalServer, Reply, TrackedHandler
from tests.fakes.whatsapp import (
    APP_SECRET,
    DISPLAY_PHONE_NUMBER,
    ERROR_CODES_URL,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    WABA_ID,
    FakeWhatsApp,
)

USER = "16505551234"
OTHER = "447700900123"
DAY = 24 * 3600


class _ReceiverHandler(TrackedHandler):
    receiver: Receiver

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.receiver.handshake(self)

    def _serve(self, raw: bytes) -> None:
        self._answer(self.receiver.take(self, raw))


class Receiver:
    """hermes's webhook listener at its smallest: a POST whose `X-Hub-Signature-256` is
    not the HMAC of its raw body under the app secret answers 403, else the next status
    of `plan` (then 200); the GET handshake echoes the challenge for the right token
    (else 403). It records what came in `posts` and `gets`."""

    def __init__(self, port: int = 0) -> None:
        self.cond = threading.Condition()
        self.posts: list[dict[str, Any]] = []
        self.gets: list[dict[str, str]] = []
        self.plan: list[int] = []
        self.server = LocalServer(type("Handler", (_ReceiverHandler,), {"receiver": self}), port)

    @property
    def url(self) -> str:
        return f"{self.server.url}/webhooks/whatsapp"

    def __enter__(self) -> Receiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def take(self, request: TrackedHandler, raw: bytes) -> Reply:
        signature = request.headers.get("X-Hub-Signature-256", "")
        expected = "sha256=" + hmac.new(APP_SECRET.encode(), raw, hashlib.sha256).hexdigest()
        valid = hmac.compare_digest(signature, expected)
        with self.cond:
            status = 403 if not valid else (self.plan.pop(0) if self.plan else 200)
            self.posts.append({"path": request.path, "raw": raw, "valid": valid,
                               "payload": json.loads(raw), "answered": status})  # fmt: skip
            self.cond.notify_all()
        return Reply(status, b"", content_type="text/plain")

    def handshake(self, request: TrackedHandler) -> None:
        parts = urlsplit(request.path)
        query = dict(parse_qsl(parts.query))
        with self.cond:
            self.gets.append({"path": parts.path, **query})
            self.cond.notify_all()
        right = query.get("hub.mode") == "subscribe" and hmac.compare_digest(
            query.get("hub.verify_token", ""), VERIFY_TOKEN)  # fmt: skip
        body = query.get("hub.challenge", "").encode() if right else b"forbidden"
        request._answer(Reply(200 if right else 403, body, content_type="text/plain"))

    def wait_posts(self, count: int) -> list[dict[str, Any]]:
        wait(self.cond, lambda: len(self.posts) >= count, 10, f"{count} webhook POST(s)")
        with self.cond:
            return list(self.posts)


def statuses(receiver: Receiver) -> list[dict[str, Any]]:
    """The status callbacks the receiver took (signed ones), in order of arrival."""
    with receiver.cond:
        values = [p["payload"]["entry"][0]["changes"][0]["value"] for p in receiver.posts
                  if p["valid"]]  # fmt: skip
    return [s for value in values for s in value.get("statuses", [])]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as hook:
        yield hook


@pytest.fixture
def wa(receiver: Receiver) -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp(webhook_url=receiver.url, retry_initial=0.05, retry_cap=0.2,
                      retry_max_tries=5) as fake:  # fmt: skip
        yield fake
        assert fake.internal_errors == []


def send(wa: FakeWhatsApp, body: dict[str, Any], token: str = TOKEN) -> httpx.Response:
    return httpx.post(f"{wa.graph_url}/{PHONE_NUMBER_ID}/messages", timeout=10,
                      json={"messaging_product": "whatsapp", **body},
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def text(to: str, body: str) -> dict[str, Any]:
    return {"recipient_type": "individual", "to": to, "type": "text",
            "text": {"preview_url": False, "body": body}}  # fmt: skip


def upload(wa: FakeWhatsApp, data: bytes, mime: str | None, name: str = "chart.txt",
           token: str = TOKEN, part_type: str | None = None) -> httpx.Response:  # fmt: skip
    """`POST /{phone}/media` as the Cloud API's example: `type` the MIME type (None: no
    such field, only the part's `part_type`)."""
    fields = {"messaging_product": "whatsapp"} | ({} if mime is None else {"type": mime})
    return httpx.post(f"{wa.graph_url}/{PHONE_NUMBER_ID}/media", timeout=30, data=fields,
                      files={"file": (name, data, part_type or mime or "")},
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def media(to: str, kind: str, media_id: str, **more: Any) -> dict[str, Any]:
    return {"to": to, "type": kind, kind: {"id": media_id, **more}}


def template(to: str, name: str, *params: str) -> dict[str, Any]:
    return {"to": to, "type": "template", "template": {
        "name": name, "language": {"code": "en_US"},
        "components": [{"type": "body",
                        "parameters": [{"type": "text", "text": p} for p in params]}],
    }}  # fmt: skip


def test_a_text_delivery_is_metas_payload_signed_over_its_raw_bytes(
    wa: FakeWhatsApp, receiver: Receiver
):
    wamid = wa.deliver_text(USER, "héllo / there", name="Sheena Nelson", timestamp=1749416383)
    assert wamid.startswith("wamid.")
    assert wa.wait_delivered(wamid)["status_codes"] == [200]
    [post] = receiver.wait_posts(1)
    assert post["valid"] and post["path"] == "/webhooks/whatsapp"
    assert b"h\\u00e9llo \\/ there" in post["raw"]  # escaped as Meta does
    assert json.dumps(post["payload"], separators=(",", ":")).encode() != post["raw"]
    assert post["payload"] == {"object": "whatsapp_business_account", "entry": [{
        "id": WABA_ID, "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": DISPLAY_PHONE_NUMBER,
                         "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": USER}],
            "messages": [{"from": USER, "id": wamid, "timestamp": "1749416383", "type": "text",
                          "text": {"body": "héllo / there"}}],
        }}],
    }]}  # fmt: skip
    assert wa.last_inbound(USER) == 1749416383
    [attempt] = wa.deliveries
    assert (attempt["id"], attempt["kind"], attempt["attempt"], attempt["status_code"],
            attempt["signed"]) == (wamid, "message", 1, 200, True)  # fmt: skip


def test_a_500_is_retried_until_a_200_and_a_forgery_is_tried_once(
    wa: FakeWhatsApp, receiver: Receiver
):
    receiver.plan = [500, 503]
    wamid = wa.deliver_text(USER, "again?")
    assert wa.wait_delivered(wamid)["status_codes"] == [500, 503, 200]
    posts = receiver.wait_posts(3)
    assert len({p["raw"] for p in posts}) == 1  # the same bytes each time
    assert [a["attempt"] for a in wa.deliveries] == [1, 2, 3]
    forged = wa.deliver_text(USER, "sudo rm -rf /", bad_signature=True)
    settled = wa.wait_settled(forged)
    assert (settled["state"], settled["status_codes"]) == ("gave_up", [403])
    assert wa.gave_up == [forged] and wa.deliveries[-1]["signed"] is False
    with pytest.raises(AssertionError, match="gave up"):
        wa.wait_delivered(forged)


def test_deliveries_wait_for_the_listener_and_survive_its_restart(receiver: Receiver):
    with FakeWhatsApp(retry_initial=0.05, retry_cap=0.1, retry_max_tries=50) as wa:
        first = wa.deliver_text(USER, "before any URL")
        assert wa.pending == [first] and wa.deliveries == []  # no URL: it waits
        port = receiver.server.server_address[1]
        receiver.server.stop()  # hermes is down
        wa.configure(webhook_url=receiver.url)
        failed = wa.wait_attempts(2, key=first)
        assert all(a["status_code"] is None and "Connect" in a["error"] for a in failed)
        with Receiver(port) as back:  # hermes is back on its port
            assert wa.wait_delivered(first)["status_codes"][-1] == 200
            assert [p["payload"]["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
                    for p in back.wait_posts(1)] == [first]  # fmt: skip
        assert wa.internal_errors == []


def test_a_text_to_a_user_silent_for_25_hours_fails_with_131047(
    wa: FakeWhatsApp, receiver: Receiver
):
    wa.silent_for(USER, 25 * 3600)
    assert not wa.window_open(USER)
    answer = send(wa, text("+1 650-555-1234", "your brief"))
    assert answer.status_code == 200  # accepted, as Meta does
    body = answer.json()
    wamid = body["messages"][0]["id"]
    assert body == {"messaging_product": "whatsapp",
                    "contacts": [{"input": "+1 650-555-1234", "wa_id": USER}],
                    "messages": [{"id": wamid}]}  # fmt: skip
    wa.wait_delivered(wamid, "failed")
    [failed] = statuses(receiver)
    assert failed["id"] == wamid and failed["status"] == "failed"
    assert failed["recipient_id"] == USER and failed["timestamp"].isdigit()
    assert failed["errors"] == [{
        "code": 131047, "title": "Re-engagement message", "message": "Re-engagement message",
        "error_data": {"details": "Message failed to send because more than 24 hours have"
                                  " passed since the customer last replied to this number."},
        "href": ERROR_CODES_URL,
    }]  # fmt: skip
    assert wa.statuses_of(wamid) == ["failed"]
    [record] = wa.sent
    assert (record["kind"], record["to"], record["text"], record["preview_url"]) == (
        "text", USER, "your brief", False)  # fmt: skip
    assert (record["window_open"], record["error_code"]) == (False, 131047)
    assert wa.sent_to("+1 (650) 555-1234") == [record]
    with pytest.raises(ValueError, match="failed"):
        wa.user_reads(wamid)
    inbound = wa.deliver_text(USER, "I'm back")  # the user writes: the window reopens
    wa.wait_delivered(inbound)
    again = send(wa, text(USER, "welcome back")).json()["messages"][0]["id"]
    wa.wait_delivered(again, "delivered")
    assert [(s["id"], s["status"]) for s in statuses(receiver)][1:] == [
        (again, "sent"), (again, "delivered")]  # fmt: skip
    assert statuses(receiver)[1]["pricing"]["category"] == "service"


def test_a_template_goes_out_whatever_the_window(wa: FakeWhatsApp, receiver: Receiver):
    assert not wa.window_open(OTHER)  # never wrote
    answer = send(wa, template(OTHER, "daily_brief", "Rain at noon"))
    assert answer.status_code == 200
    message = answer.json()["messages"][0]
    assert message["message_status"] == "accepted"
    wa.wait_delivered(message["id"], "delivered")
    assert [s["status"] for s in statuses(receiver)] == ["sent", "delivered"]
    [record] = wa.wait_sent(1, to=OTHER)
    assert (record["kind"], record["template"], record["language"], record["parameters"]) == (
        "template", "daily_brief", "en_US", ["Rain at noon"])  # fmt: skip
    assert record["error_code"] is None and record["text"] is None
    wa.user_reads(message["id"])
    assert wa.wait_delivered(message["id"], "read")["kind"] == "read"
    wa.templates = {"daily_brief": "en_US"}
    unknown = send(wa, template(OTHER, "nope"))
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == 132001


def test_a_wrong_token_is_401_code_190(wa: FakeWhatsApp):
    answer = send(wa, text(USER, "hi"), token="EAAG-wrong")
    assert answer.status_code == 401
    error = answer.json()["error"]
    assert (error["code"], error["type"]) == (190, "OAuthException")
    assert error["message"] == "Invalid OAuth access token - Cannot parse access token"
    assert error["fbtrace_id"]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    nowhere = httpx.get(f"{wa.url}/v21.0/x/y/z", headers=bearer, timeout=10)
    assert nowhere.json()["error"]["code"] == 2500
    wa.revoke_token()
    expired = send(wa, text(USER, "hi"))
    assert expired.status_code == 401 and expired.json()["error"]["error_subcode"] == 463
    assert wa.sent == [] and wa.refused == []  # refused before it was a send


def test_media_metadata_then_bytes_with_the_token(wa: FakeWhatsApp, receiver: Receiver):
    voice = b"OggS\x00fake opus"
    media_id = wa.add_media(voice, "audio/ogg; codecs=opus")
    wamid = wa.deliver_media(USER, "voice", media_id)
    wa.wait_delivered(wamid)
    [post] = receiver.wait_posts(1)
    message = post["payload"]["entry"][0]["changes"][0]["value"]["messages"][0]
    assert message["type"] == "audio" and message["audio"]["voice"] is True
    assert message["audio"]["id"] == media_id
    assert message["audio"]["mime_type"] == "audio/ogg; codecs=opus"
    assert wa.downloads == []  # nothing is fetched on its own
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    info = httpx.get(f"{wa.url}/v19.0/{media_id}", headers=bearer, timeout=10).json()
    assert info == {
        "messaging_product": "whatsapp", "url": info["url"], "mime_type": "audio/ogg; codecs=opus",
        "sha256": hashlib.sha256(voice).hexdigest(), "file_size": str(len(voice)), "id": media_id,
    }  # fmt: skip
    assert info["url"].startswith(f"{wa.url}/media/{media_id}?")
    assert httpx.get(info["url"], timeout=10).status_code == 401
    assert wa.downloads == []
    got = httpx.get(info["url"], headers=bearer, timeout=10)
    assert (got.status_code, got.content, got.headers["content-type"]) == (
        200, voice, "audio/ogg; codecs=opus")  # fmt: skip
    assert wa.downloads == [media_id] and wa.media_lookups == [media_id]
    missing = httpx.get(f"{wa.url}/v19.0/999", headers=bearer, timeout=10)
    assert missing.status_code == 400 and missing.json()["error"]["error_subcode"] == 33


def test_rate_faults_answer_as_configured(wa: FakeWhatsApp):
    wa.deliver_text(USER, "hi")
    wa.fail(130429, status=429)
    wa.fail(131056, to=OTHER)
    limited = send(wa, text(USER, "one"))
    assert limited.status_code == 429
    error = limited.json()["error"]
    assert (error["code"], error["message"], error["type"]) == (
        130429, "(#130429) Rate limit hit", "OAuthException")  # fmt: skip
    assert error["error_data"]["messaging_product"] == "whatsapp" and error["fbtrace_id"]
    assert send(wa, text(USER, "two")).status_code == 200  # that fault is used up
    pair = send(wa, template(OTHER, "daily_brief"))
    assert pair.status_code == 400 and pair.json()["error"]["code"] == 131056
    assert [r["code"] for r in wa.wait_refused(2)] == [130429, 131056]
    assert wa.rate_limited == 2 and [s["text"] for s in wa.sent] == ["two"]
    too_long = send(wa, text(USER, "x" * 4097))
    assert too_long.status_code == 400 and too_long.json()["error"]["code"] == 100
    assert send(wa, text(USER, "é" * 4096)).status_code == 200


def test_a_forced_failure_and_mark_as_read(wa: FakeWhatsApp, receiver: Receiver):
    inbound = wa.deliver_text(USER, "hello")
    wa.fail_next_send(USER, 131026)
    wamid = send(wa, text(USER, "hi")).json()["messages"][0]["id"]
    wa.wait_delivered(wamid, "failed")
    assert [e["code"] for s in statuses(receiver) for e in s.get("errors", [])] == [131026]
    read = send(wa, {"status": "read", "message_id": inbound, "typing_indicator": {"type": "text"}})
    assert read.json() == {"success": True}
    [mark] = wa.wait_reads(1)
    assert (mark["message_id"], mark["wa_id"], mark["typing_indicator"]) == (inbound, USER, True)
    unknown = send(wa, {"status": "read", "message_id": "wamid.nope"})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == 100
    wa.status_callbacks = False
    quiet = send(wa, text(USER, "no callbacks")).json()["messages"][0]["id"]
    assert wa.statuses_of(quiet) == []


def test_replies_buttons_reactions_and_documents_are_metas_shapes(
    wa: FakeWhatsApp, receiver: Receiver
):
    ours = send(wa, template(USER, "approve")).json()["messages"][0]["id"]
    doc = wa.add_media(b"%PDF-1.7", "application/pdf", filename="report.pdf")
    keys = [
        wa.deliver_reply(USER, "yes", ours),
        wa.deliver_interactive(USER, "approve-1", "Approve", context=ours),
        wa.deliver_interactive(USER, "row-2", "Second", kind="list_reply", description="two"),
        wa.deliver_reaction(USER, ours, "👍"),
        wa.deliver_reaction(USER, ours, None),
        wa.deliver_media(USER, "document", doc, "the report"),
    ]
    for key in keys:
        wa.wait_delivered(key)
    values = [p["payload"]["entry"][0]["changes"][0]["value"]
              for p in receiver.wait_posts(len(keys))]  # fmt: skip
    messages = {m["id"]: m for value in values for m in value.get("messages", [])}
    reply, button, row, reaction, removed, document = (messages[k] for k in keys)
    assert reply["context"] == {"from": DISPLAY_PHONE_NUMBER, "id": ours}
    assert button["interactive"] == {
        "type": "button_reply", "button_reply": {"id": "approve-1", "title": "Approve"},
    }  # fmt: skip
    assert button["context"]["id"] == ours
    assert row["interactive"]["list_reply"] == {"id": "row-2", "title": "Second",
                                                "description": "two"}  # fmt: skip
    assert reaction["reaction"] == {"message_id": ours, "emoji": "👍"}
    assert removed["reaction"] == {"message_id": ours}
    assert document["document"]["filename"] == "report.pdf"
    assert document["document"]["caption"] == "the report"


def test_an_upload_is_kept_and_a_document_refers_to_it(wa: FakeWhatsApp, receiver: Receiver):
    wa.deliver_text(USER, "send me the chart")
    chart = b"the chart\r\n--not a boundary"  # CRLF and dashes inside a part are its bytes
    answer = upload(wa, chart, "text/plain")
    assert answer.status_code == 200
    media_id = answer.json()["id"]
    assert answer.json() == {"id": media_id} and media_id.isdigit()
    digest = hashlib.sha256(chart).hexdigest()
    assert wa.uploaded == [{"media_id": media_id, "filename": "chart.txt", "mime": "text/plain",
                            "size": 27, "sha256": digest}]  # fmt: skip
    assert wa.uploads == []  # kept, not sent
    sent = send(wa, media(USER, "document", media_id, caption="here it is",
                          filename="the chart.txt"))  # fmt: skip
    assert sent.status_code == 200
    wamid = sent.json()["messages"][0]["id"]
    [doc] = wa.wait_uploads(1)
    assert {k: doc[k] for k in ("to", "wamid", "type", "media_id", "filename", "mime", "size",
                                "sha256", "caption", "content", "error_code")} == {
        "to": USER, "wamid": wamid, "type": "document", "media_id": media_id,
        "filename": "the chart.txt", "mime": "text/plain", "size": 27, "sha256": digest,
        "caption": "here it is", "content": chart, "error_code": None,
    }  # fmt: skip
    assert [s["kind"] for s in wa.sent] == ["document"]
    wa.wait_delivered(wamid, "delivered")
    again = send(wa, media(USER, "document", media_id))  # an id goes more than once
    assert again.status_code == 200 and wa.wait_uploads(2)[1]["filename"] == "chart.txt"


def test_media_by_an_id_the_fake_never_issued_is_metas_400(wa: FakeWhatsApp):
    wa.deliver_text(USER, "hi")
    for kind in ("image", "audio", "document", "video"):
        answer = send(wa, media(USER, kind, "1013859600999999"))
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert (error["code"], error["message"]) == (100, f"(#100) Param {kind}.id is not a valid"
                                                     " whatsapp business account media"
                                                     " attachment ID")  # fmt: skip
    neither = send(wa, {"to": USER, "type": "image", "image": {"caption": "?"}})
    assert (
        neither.json()["error"]["message"]
        == "(#100) Either one of media ID or link must be present"
    )
    voice = upload(wa, b"OggS voice", "audio/ogg", "reply.ogg").json()["id"]
    captioned = send(wa, media(USER, "audio", voice, caption="no"))
    assert captioned.status_code == 400 and captioned.json()["error"]["code"] == 100
    assert send(wa, media(USER, "audio", voice)).status_code == 200
    [audio] = wa.wait_uploads(1)
    assert (audio["type"], audio["mime"], audio["caption"]) == ("audio", "audio/ogg", None)
    assert [r["code"] for r in wa.refused] == [100] * 6
    assert [s["kind"] for s in wa.sent] == ["audio"]


def test_an_upload_over_its_types_limit_is_refused_as_meta_does(
    wa: FakeWhatsApp, receiver: Receiver
):
    wa.deliver_text(USER, "hi")
    big = b"\x89PNG" + bytes(5 * 1024 * 1024 - 3)  # 5 MiB and a byte
    refused = upload(wa, big, "image/png", "photo.png")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["message"], error["error_data"]["details"]) == (
        100,
        "(#100) Invalid parameter",
        "File Too Large: The file you uploaded is too large.",
    )
    assert wa.uploaded == []
    assert upload(wa, big[:-1], "image/png", "photo.png").status_code == 200  # 5 MiB: taken
    as_bytes = upload(wa, big, "application/octet-stream", "photo.png")  # as a document
    assert as_bytes.status_code == 200
    media_id = as_bytes.json()["id"]
    send(wa, media(USER, "document", media_id))
    [doc] = wa.wait_uploads(1)
    assert (doc["size"], doc["content"], doc["filename"]) == (len(big), None, "photo.png")
    assert doc["sha256"] == hashlib.sha256(big).hexdigest()
    wamid = send(wa, media(USER, "image", media_id)).json()["messages"][0]["id"]
    wa.wait_delivered(wamid, "failed")  # accepted, then failed: not an image's type
    [failed] = [s for s in statuses(receiver) if s["status"] == "failed"]
    assert failed["errors"][0]["code"] == 131053 and wa.wait_uploads(2)[1]["error_code"] == 131053
    tiff = upload(wa, b"II*", None, "scan.tiff", part_type="image/tiff")  # the part's type
    assert [u["mime"] for u in wa.uploaded][-1] == "image/tiff" and tiff.status_code == 200


def test_uploads_are_authorized_and_their_faults_injected(wa: FakeWhatsApp):
    wrong = upload(wa, b"x", "text/plain", token="EAAG-wrong")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == 190
    elsewhere = httpx.post(f"{wa.graph_url}/999/media", data={"messaging_product": "whatsapp"},
                           files={"file": ("a.txt", b"x", "text/plain")},
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)  # fmt: skip
    assert elsewhere.status_code == 400 and elsewhere.json()["error"]["error_subcode"] == 33
    not_a_form = httpx.post(f"{wa.graph_url}/{PHONE_NUMBER_ID}/media", json={"file": "x"},
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)  # fmt: skip
    assert not_a_form.status_code == 400 and not_a_form.json()["error"]["code"] == 100
    wa.fail_upload(130429, status=429)
    limited = upload(wa, b"x", "text/plain")
    assert limited.status_code == 429 and limited.json()["error"]["code"] == 130429
    assert wa.uploaded == []
    wa.lose_answer("media")
    with pytest.raises(httpx.RemoteProtocolError):
        upload(wa, b"lost", "text/plain")
    [kept] = wa.uploaded  # Meta kept it; its id never came back
    assert kept["size"] == 4
    wa.deliver_text(USER, "hi")
    wa.lose_answer("messages")
    with pytest.raises(httpx.RemoteProtocolError):
        send(wa, media(USER, "document", kept["media_id"]))
    [taken] = wa.wait_uploads(1)  # the send was taken all the same
    assert taken["media_id"] == kept["media_id"]
    assert send(wa, text(USER, "answered again")).status_code == 200


def test_the_handshake_reaches_the_receiver_with_the_right_query(
    wa: FakeWhatsApp, receiver: Receiver
):
    assert wa.verify(challenge="1158201444") == (200, "1158201444")
    assert wa.verify(token="wrong", challenge="42") == (403, "forbidden")
    assert receiver.gets == [
        {"path": "/webhooks/whatsapp", "hub.mode": "subscribe", "hub.challenge": "1158201444",
         "hub.verify_token": VERIFY_TOKEN},
        {"path": "/webhooks/whatsapp", "hub.mode": "subscribe", "hub.challenge": "42",
         "hub.verify_token": "wrong"},
    ]  # fmt: skip
    assert [v["verified"] for v in wa.verifications] == [True, False]


def test_the_remote_control_in_its_own_process(receiver: Receiver):
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.whatsapp"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert httpx.post(f"{url}/_fake/configure", json={"webhook_url": receiver.url},
                          timeout=10).json() == {"ok": True, "result": None}  # fmt: skip
        wamid = httpx.post(f"{url}/_fake/deliver_text", json={"wa_id": USER, "text": "hi"},
                           timeout=10).json()["result"]  # fmt: skip
        [post] = receiver.wait_posts(1)
        assert post["valid"] and post["payload"]["entry"][0]["changes"][0]["value"][
            "messages"][0]["id"] == wamid  # fmt: skip
        state = httpx.get(f"{url}/_fake/state", timeout=10).json()["result"]
        assert state["webhook_url"] == receiver.url
    finally:
        proc.terminate()
        proc.wait(10)
