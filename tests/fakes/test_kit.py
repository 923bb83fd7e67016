"""The fakes' shared HTTP kit on its own: the route table, the body decoder and the error
shape every fake answers with."""

from __future__ import annotations

import pytest

from tests.fakes.local_http import BodyError, ErrorShape, decode_body, form_parts, match, routes

TABLE = routes(
    ("*", "/bot{token}/{method}", "call"),
    ("GET", "/file/{path*}", "download"),
    ("POST", "/channels/{channel}/{kind:messages|typing}", "post"),
)


@pytest.mark.parametrize(
    ("verb", "path", "found"),
    [
        ("POST", "/bot1%3Aab/sendMessage", ("call", {"token": "1:ab", "method": "sendMessage"})),
        ("GET", "/file/documents/a%20b.pdf", ("download", {"path": "documents/a b.pdf"})),
        ("POST", "/channels/7/typing", ("post", {"channel": "7", "kind": "typing"})),
        ("POST", "/channels/7/pins", 404),
        ("PUT", "/file/x", 405),
        ("GET", "/elsewhere", 404),
    ],
)
def test_a_route_table_matches_verb_and_path(verb: str, path: str, found: object):
    assert match(TABLE, verb, path) == found


def form(*parts: bytes, preamble: bytes = b"") -> tuple[str, bytes]:
    body = preamble + b"".join(b"--B\r\n" + p + b"\r\n" for p in parts) + b"--B--\r\n"
    return "multipart/form-data; boundary=B", body


def test_a_form_keeps_files_as_parts_and_fields_as_text():
    content_type, raw = form(
        b'Content-Disposition: form-data; name="chat_id"\r\n\r\n42',
        b"Content-Disposition: form-data; name=\"doc\"; filename*=UTF-8''%C3%A9t%C3%A9.txt\r\n"
        b"Content-Type: Text/Plain; charset=utf-8\r\n\r\nbytes\r\n--Bnot-a-boundary",
        b'Content-Disposition: form-data; name="b64"; filename="x"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\naGk=",
        preamble=b"ignored\r\n",
    )
    fields = decode_body(content_type, raw)
    assert fields["chat_id"] == "42"
    doc = fields["doc"]
    assert (doc.filename, doc.mime_type) == ("été.txt", "text/plain")
    assert doc.data == b"bytes\r\n--Bnot-a-boundary"
    assert doc.info() == {"file_name": "été.txt", "mime_type": "text/plain", "size": 24}
    assert fields["b64"].data == b"hi"


@pytest.mark.parametrize(
    ("content_type", "raw", "kind"),
    [
        ("application/json", b"{", "not_json"),
        ("multipart/form-data", b"--B--", "not_form"),  # no boundary
        ("multipart/form-data; boundary=B", b"--B\r\nContent-Disposition: x\r\n", "not_form"),
        ("multipart/form-data; boundary=B", b"garbage", "not_form"),
    ],
)
def test_a_body_that_is_not_what_it_says_is_refused(content_type: str, raw: bytes, kind: str):
    with pytest.raises(BodyError) as refused:
        decode_body(content_type, raw) if kind != "not_form" else form_parts(content_type, raw)
    assert refused.value.kind == kind


def test_json_a_form_and_no_body():
    assert decode_body("application/json; charset=utf-8", b'{"a": [1]}') == {"a": [1]}
    assert decode_body("", b'{"a": 1}') == {"a": 1}  # no type: the default
    form_type = "application/x-www-form-urlencoded"
    assert decode_body(form_type, b"a=1&a=2&b=%C3%A9") == {"a": "2", "b": "é"}
    assert decode_body("text/plain", b"a=1", default=form_type) == {"a": "1"}
    assert decode_body("application/json", b"") == {}


def test_an_error_shape_is_data():
    telegram = ErrorShape("description", status="error_code", fixed={"ok": False})
    refused = telegram.reply(400, "Bad Request")
    assert refused.body == {"ok": False, "error_code": 400, "description": "Bad Request"}
    slack = ErrorShape("error", fixed={"ok": False})
    limited = slack.reply(429, "ratelimited", retry_after=2.5)
    assert (limited.status, limited.body) == (429, {"ok": False, "error": "ratelimited"})
    assert limited.headers == [("Retry-After", "2.5")]
    matrix = ErrorShape("error", code="errcode").reply(404, "Not found", "M_NOT_FOUND", x=1)
    assert matrix.status == 404
    assert matrix.body == {"errcode": "M_NOT_FOUND", "error": "Not found", "x": 1}
