"""web_fetch against a real web site on 127.0.0.1 (reached through `allow_private`):
pages read as text, the size, time and redirect caps, and the address guard, which
refuses loopback, private, link-local and metadata addresses after resolution, on
every hop, with no connection made to what it refuses."""

from __future__ import annotations

import datetime
import gzip
import json
import re
import socket
import ssl
import threading
from functools import partial
from ipaddress import ip_address

import pytest
import trafilatura
import trio

from hermes.agent.tools import web_fetch
from hermes.agent.tools.base import ToolError
from hermes.agent.tools.web_fetch import (
    EXTRACT_SECONDS,
    FETCH_SECONDS,
    MAX_BYTES,
    MAX_REDIRECTS,
    WebFetchTool,
)
from hermes.agent.web.addresses import Refused
from hermes.agent.web.readable import html_page
from hermes.config import ConfigError
from hermes.terminal.addresses import AllowList, refusal
from tests.fakes.pages import FakePages

LOCAL = ("127.0.0.1",)
ARTICLE = """<!doctype html><html><head><title>The Big Story - Example News</title></head>
<body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li>
<li><a href="/subscribe">Subscribe to our newsletter</a></li></ul></nav>
<article><h1>The Big Story</h1>
<p>Scientists observed the <b>quokka</b> migrating across the island during the long dry
summer, a behaviour never recorded before on Rottnest.</p>
<p>The researchers followed forty <a href="/animals">animals</a> over three months and
wrote down every crossing they saw near the salt lakes.</p>
<h2>Why it matters</h2><ul><li>a first record</li><li>a changing climate</li></ul>
</article>
<footer>Copyright 2024 Example News. All rights reserved. Cookie settings.</footer>
</body></html>"""


@pytest.fixture
def pages():
    with FakePages() as fake:
        yield fake
    assert fake.internal_errors == []


class CountingSockets(trio.abc.SocketFactory):
    """Trio's sockets, counted: every connection attempt makes one."""

    def __init__(self) -> None:
        self.made = 0

    def socket(self, family=socket.AF_INET, type=socket.SOCK_STREAM, proto=0):
        self.made += 1
        return trio.socket.from_stdlib_socket(socket.socket(family, type, proto))


@pytest.fixture
async def sockets():
    counter = CountingSockets()
    trio.socket.set_custom_socket_factory(counter)  # for this test's run only
    return counter


class Names(trio.abc.HostnameResolver):
    """DNS for made-up names: each name answers its list of answers in turn (the last
    one again after that); every question is recorded."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def getaddrinfo(self, host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        self.asked.append(name)
        if name not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        turns = self.answers[name]
        literals = turns[min(self.asked.count(name), len(turns)) - 1]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, int(port), 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port)))
            for a in literals
        ]

    async def getnameinfo(self, sockaddr, flags):
        raise NotImplementedError


def names(answers: dict[str, list[list[str]]]) -> Names:
    resolver = Names(answers)
    trio.socket.set_custom_hostname_resolver(resolver)  # for this test's run only
    return resolver


async def fetch(ctx, url: str, allow: tuple[str, ...] = LOCAL, **args) -> dict:
    return json.loads(await WebFetchTool(allow_private=allow)({"url": url, **args}, ctx))


def tiny_pdf(lines: list[str], title: str) -> bytes:
    """A one-page PDF whose page shows `lines` in Helvetica, made by hand."""
    content = "BT /F1 12 Tf 72 720 Td " + " ".join(f"({x}) Tj 0 -16 Td" for x in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        " /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\n"
        f"startxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


# -- what a fetched body reads as ---------------------------------------------------------


async def test_html_is_the_article_as_markdown_without_the_boilerplate(pages, ctx):
    url = pages.page("/story", ARTICLE, "text/html; charset=utf-8")
    answer = await fetch(ctx, url)
    assert (answer["url"], answer["status"], answer["content_type"]) == (url, 200, "text/html")
    assert answer["title"] == "The Big Story"
    text = answer["text"]
    assert "Scientists observed the **quokka** migrating across the island" in text
    assert "## Why it matters" in text
    assert f"[animals]({pages.url}/animals)" in text  # links kept, made absolute
    for boilerplate in ("Subscribe to our newsletter", "About us", "All rights reserved"):
        assert boilerplate not in text


async def test_html_as_plain_text(pages, ctx):
    url = pages.page("/story", ARTICLE, "text/html")
    text = (await fetch(ctx, url, format="text"))["text"]
    assert "Scientists observed the quokka migrating" in text
    assert "**" not in text and "](" not in text
    assert "Subscribe to our newsletter" not in text


async def test_html_charset_from_the_page_when_the_header_names_none(pages, ctx):
    page = "<html><head><meta charset='windows-1252'><title>Caf\xe9</title></head><body>"
    page += "<article><p>Un caf\xe9 cr\xe8me sur la terrasse, au soleil du matin.</p>"
    page += "</article></body></html>"
    url = pages.page("/fr", page.encode("cp1252"), "text/html")
    answer = await fetch(ctx, url)
    assert "Un café crème sur la terrasse" in answer["text"]
    assert answer["title"] == "Café"


def test_a_page_without_main_content_falls_back_to_the_plain_text_baseline(monkeypatch):
    monkeypatch.setattr(trafilatura, "extract", lambda *args, **kwargs: None)
    page = html_page(b"<html><body><div>Only these words</div></body></html>", None,
                     "http://example.org/", markdown=True)  # fmt: skip
    assert page.text == "Only these words"


async def test_text_and_json_as_they_are_in_their_charset(pages, ctx):
    url = pages.page("/note.txt", "café au lait\n".encode("latin-1"),
                     "text/plain; charset=iso-8859-1")  # fmt: skip
    assert (await fetch(ctx, url))["text"] == "café au lait\n"
    data = json.dumps({"animal": "quokka", "count": 40})
    url = pages.page("/data", data, "application/json")
    answer = await fetch(ctx, url)
    assert (answer["content_type"], json.loads(answer["text"])) == (
        "application/json",
        {"animal": "quokka", "count": 40},
    )
    url = pages.page("/feed", "<rss><channel><title>t</title></channel></rss>",
                     "application/rss+xml")  # fmt: skip
    assert (await fetch(ctx, url))["text"].startswith("<rss>")


async def test_pdf_text(pages, ctx):
    url = pages.page("/paper.pdf", tiny_pdf(["Quokkas cross at dawn", "page one ends"],
                                            "Quokka Crossings"), "application/pdf")  # fmt: skip
    answer = await fetch(ctx, url)
    assert answer["title"] == "Quokka Crossings"
    assert "Quokkas cross at dawn" in answer["text"]
    assert "page one ends" in answer["text"]


async def test_a_broken_pdf_is_a_clear_error(pages, ctx):
    url = pages.page("/broken.pdf", b"%PDF-1.4\nnot really", "application/pdf")
    with pytest.raises(ToolError, match="the PDF cannot be read"):
        await fetch(ctx, url)


@pytest.mark.parametrize(
    ("content_type", "named"),
    [("image/png", "image/png"), ("application/octet-stream; x=1", "application/octet-stream")],
)
async def test_other_content_is_refused_by_its_type(pages, ctx, content_type, named):
    url = pages.page("/thing", b"\x89PNG\r\n\x1a\n" + bytes(100), content_type)
    with pytest.raises(ToolError, match=named):
        await fetch(ctx, url)


async def test_a_404_page_is_read_with_its_status(pages, ctx):
    url = pages.page("/gone", "<html><body><p>This page moved to the archive.</p></body></html>",
                     "text/html", status=404)  # fmt: skip
    answer = await fetch(ctx, url)
    assert answer["status"] == 404
    assert "This page moved to the archive." in answer["text"]


async def test_a_gzip_body_is_inflated(pages, ctx):
    url = pages.page("/z", gzip.compress(b"packed words " * 1000), "text/plain",
                     headers={"content-encoding": "gzip"})  # fmt: skip
    text = (await fetch(ctx, url))["text"]
    assert text.startswith("packed words packed words")


async def test_long_text_is_kept_within_the_sessions_output_cap(pages, ctx):
    body = "head of the document " + "filler " * 50_000 + " tail of the document"
    url = pages.page("/long", body, "text/plain")
    text = (await fetch(ctx, url))["text"]
    assert len(text) < len(body) // 4
    assert text.startswith("head of the document")
    assert text.endswith("tail of the document")


# -- caps ----------------------------------------------------------------------------------


async def test_a_body_of_the_size_cap_is_read(pages, ctx):
    url = pages.page("/max", b"a" * MAX_BYTES, "text/plain")
    answer = await fetch(ctx, url)
    assert answer["text"].startswith("aaaa")


async def test_a_body_past_the_size_cap_is_refused(pages, ctx):
    assert MAX_BYTES == 10 * 1024 * 1024
    url = pages.page("/big", b"a" * (MAX_BYTES + 1), "text/plain")
    with pytest.raises(ToolError, match="larger than the 10 MB limit"):
        await fetch(ctx, url)


async def test_a_compressed_body_that_inflates_past_the_cap_is_refused(pages, ctx):
    bomb = gzip.compress(bytes(MAX_BYTES + 1))
    assert len(bomb) < 100_000
    url = pages.page("/bomb", bomb, "text/plain", headers={"content-encoding": "gzip"})
    with pytest.raises(ToolError, match="larger than the 10 MB limit"):
        await fetch(ctx, url)


async def test_five_redirects_are_followed(pages, ctx):
    assert MAX_REDIRECTS == 5
    answer = await fetch(ctx, f"{pages.url}/hop/5")
    assert (answer["url"], answer["text"]) == (f"{pages.url}/hop/0", "arrived")
    assert pages.requests == [f"/hop/{n}" for n in range(5, -1, -1)]


async def test_a_sixth_redirect_is_refused_and_not_followed(pages, ctx):
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await fetch(ctx, f"{pages.url}/hop/6")
    assert pages.requests == [f"/hop/{n}" for n in range(6, 0, -1)]  # /hop/0 never asked


async def test_a_redirect_to_another_scheme_is_refused(pages, ctx):
    url = pages.redirect("/away", "file:///etc/passwd")
    with pytest.raises(ToolError, match="http:// and https:// URLs only"):
        await fetch(ctx, url)


async def stalling_site(nursery: trio.Nursery, behaviour: str) -> str:
    """A site in this test's own Trio loop (so the autojump clock only moves when it
    waits too) that answers slowly in one of three ways; its URL."""

    async def serve(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some()
        if behaviour == "silent":
            await trio.sleep_forever()
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                              b"content-length: 1000\r\n\r\nfirst bytes")  # fmt: skip
        while behaviour == "trickle":  # a byte a second: every read is quick
            await trio.sleep(1)
            await stream.send_all(b".")
        await trio.sleep_forever()

    listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/slow"


@pytest.mark.parametrize("behaviour", ["silent", "stalled_body", "trickle"])
async def test_the_whole_fetch_is_bounded_in_time(autojump_clock, ctx, behaviour):
    async with trio.open_nursery() as nursery:
        url = await stalling_site(nursery, behaviour)
        start = trio.current_time()
        with pytest.raises(ToolError, match="took longer than the 20 s limit"):
            await fetch(ctx, url)
        assert FETCH_SECONDS <= trio.current_time() - start < FETCH_SECONDS + 1
        nursery.cancel_scope.cancel()


async def test_reading_a_body_is_bounded_in_time_too(autojump_clock, ctx, monkeypatch):
    """A page whose text takes too long to read (a pathological PDF) is given up after
    EXTRACT_SECONDS; its thread is left to finish, within the tool's own few places."""
    stuck = threading.Event()
    monkeypatch.setattr(trafilatura, "extract", lambda *args, **kwargs: stuck.wait(60))

    async def serve(stream: trio.SocketStream) -> None:  # in this loop: see stalling_site
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some()
        page = b"<html><body><p>words</p></body></html>"
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                              b"content-length: %d\r\n\r\n%s" % (len(page), page))  # fmt: skip

    try:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
            url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
            start = trio.current_time()
            with pytest.raises(ToolError, match=f"took longer than {EXTRACT_SECONDS:g} s"):
                await fetch(ctx, url)
            assert trio.current_time() - start == pytest.approx(EXTRACT_SECONDS, abs=1)
            nursery.cancel_scope.cancel()
    finally:
        stuck.set()


# -- the address guard ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0", "2130706433", "127.1"],
)
async def test_the_host_itself_is_refused_and_never_connected_to(pages, sockets, ctx, host):
    port = pages.url.rsplit(":", 1)[1]
    pages.page("/secret", "the host's own page", "text/plain")
    with pytest.raises(Refused, match="web.allow_private") as refused:
        await fetch(ctx, f"http://{host}:{port}/secret", allow=())
    assert "loopback" in str(refused.value) or "unspecified" in str(refused.value)
    assert (pages.requests, sockets.made) == ([], 0)


async def test_localhost_is_refused_as_what_it_resolves_to(ctx):
    with pytest.raises(
        Refused, match=r"localhost resolves to (127\.0\.0\.1|::1), which is loopback"
    ):
        await fetch(ctx, "http://localhost:9/", allow=())


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://10.0.0.1/", "10.0.0.1 is private"),
        ("http://192.168.1.1/admin", "192.168.1.1 is private"),
        ("http://169.254.169.254/latest/meta-data/",
         r"169.254.169.254 is link-local \(a cloud metadata address\)"),
        ("http://100.64.0.1/", r"100.64.0.1 is shared address space \(CGNAT"),
        ("http://[fd00:ec2::254]/", "fd00:ec2::254 is private"),
        ("http://[fe80::1]/", "fe80::1 is link-local"),
        ("http://[::ffff:10.0.0.1]/", "the IPv4-mapped form of 10.0.0.1, which is private"),
        ("http://224.0.0.1/", "224.0.0.1 is multicast"),
    ],
)  # fmt: skip
async def test_private_link_local_and_metadata_addresses_are_refused(sockets, ctx, url, why):
    with pytest.raises(Refused, match=why):
        await fetch(ctx, url, allow=())
    assert sockets.made == 0


async def test_a_redirect_from_an_allowed_site_to_a_private_address_is_refused(pages, sockets, ctx):
    url = pages.redirect("/to-lan", "http://10.0.0.1/router")
    with pytest.raises(Refused, match="10.0.0.1 is private"):
        await fetch(ctx, url)
    assert pages.requests == ["/to-lan"]
    assert sockets.made == 1  # the allowed site's; none for 10.0.0.1


async def test_a_name_resolving_to_loopback_is_refused_after_resolution(pages, sockets, ctx):
    names({"evil.test": [["127.0.0.1"]]})
    port = pages.url.rsplit(":", 1)[1]
    with pytest.raises(Refused, match="evil.test resolves to 127.0.0.1, which is loopback"):
        await fetch(ctx, f"http://evil.test:{port}/", allow=())
    assert (pages.requests, sockets.made) == ([], 0)


async def test_every_address_of_a_name_must_pass(sockets, ctx):
    names({"mixed.test": [["93.184.216.34", "10.1.2.3"]]})
    with pytest.raises(Refused, match="mixed.test resolves to 10.1.2.3, which is private"):
        await fetch(ctx, "http://mixed.test/", allow=())
    assert sockets.made == 0  # not even to the public one


async def test_the_checked_address_is_the_one_connected_to(pages, ctx):
    """A rebinding name answers an allowed address, then a private one: it is resolved
    once, and the connection goes to what was checked."""
    resolver = names({"rebind.test": [["127.0.0.1"], ["10.0.0.1"]]})
    port = pages.url.rsplit(":", 1)[1]
    pages.page("/", "served by the checked address", "text/plain")
    answer = await fetch(ctx, f"http://rebind.test:{port}/")
    assert answer["text"] == "served by the checked address"
    assert resolver.asked == ["rebind.test"]


async def test_allow_private_lets_through_exactly_what_it_lists(pages, ctx):
    names({"pages.test": [["127.0.0.1"]], "other.test": [["127.0.0.1"]]})
    port = pages.url.rsplit(":", 1)[1]
    pages.page("/", "a local page", "text/plain")
    assert (await fetch(ctx, f"http://pages.test:{port}/", allow=("pages.test",)))["text"]
    assert (await fetch(ctx, f"{pages.url}/", allow=("127.0.0.0/8",)))["text"]
    with pytest.raises(Refused, match="other.test resolves to 127.0.0.1"):
        await fetch(ctx, f"http://other.test:{port}/", allow=("pages.test", "10.0.0.0/8"))
    assert pages.requests == ["/", "/"]


async def test_an_unknown_name_is_a_clear_error(ctx):
    names({})
    with pytest.raises(ToolError, match="cannot resolve nowhere.test"):
        await fetch(ctx, "http://nowhere.test/")


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("169.254.169.254", "link-local (a cloud metadata address)"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared address space (CGNAT, 100.64.0.0/10)"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),  # Python calls it global
        ("ff0e::1", "multicast"),
        ("240.0.0.1", "reserved, not globally routable"),
        ("192.0.2.1", "reserved, not globally routable"),
        ("fec0::1", "site-local"),  # Python calls it global
        ("::ffff:127.0.0.1", "the IPv4-mapped form of 127.0.0.1, which is loopback"),
        ("64:ff9b::a9fe:a9fe",
         "the NAT64 form of 169.254.169.254, which is link-local (a cloud metadata address)"),
        ("64:ff9b:1::1", "reserved, not globally routable"),  # local-use NAT64
        ("2002:7f00:1::", "the 6to4 form of 127.0.0.1, which is loopback"),
        ("::7f00:1", "the IPv4-compatible form of 127.0.0.1, which is loopback"),
        ("::808:808", "reserved, not globally routable"),
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),  # a public address through NAT64
    ],
)  # fmt: skip
def test_refusal_names_why(address, why):
    assert refusal(ip_address(address)) == why


def test_allow_list_entries_are_names_addresses_or_ranges():
    allow = AllowList.parse(["10.0.0.0/8", " 192.168.1.7 ", "Intranet.Example.", "fd00::/8"])
    assert allow.hosts == frozenset({"intranet.example"})
    assert allow.allows("intranet.example", ip_address("172.16.0.1"))
    assert allow.allows("x", ip_address("10.9.9.9"))
    assert allow.allows("x", ip_address("::ffff:10.9.9.9"))
    assert allow.allows("x", ip_address("192.168.1.7"))
    assert not allow.allows("x", ip_address("192.168.1.8"))
    assert not allow.allows("intranet.example.org", ip_address("172.16.0.1"))


@pytest.mark.parametrize("entry", ["300.1.1.1", "10.0.0.0/33", "http://nas.local", "*.corp", ""])
def test_a_bad_allow_list_entry_is_a_config_error(entry):
    with pytest.raises(ConfigError, match=re.escape(f"web.allow_private: {entry!r}")):
        WebFetchTool(allow_private=(entry,))


# -- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({}, "missing argument 'url'"),
        ({"url": "ftp://example.org/file"}, "http:// and https:// URLs only"),
        ({"url": "example.org"}, "http:// and https:// URLs only"),
        ({"url": "http://example.org/", "format": "html"}, "format must be one of"),
    ],
)
async def test_bad_arguments_are_clear_errors(sockets, ctx, args, error):
    with pytest.raises(ToolError, match=error):
        await WebFetchTool()(args, ctx)
    assert sockets.made == 0


# -- TLS: the connection goes to a checked address, the certificate is the host name's ----


def tls_files(tmp_path, name: str) -> tuple[str, str, str]:
    """A test CA and a certificate for `name` it signed: (ca, cert, key) PEM paths."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def issue(subject: str, key, issuer: str, signer, ca: bool):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = issue("hermes test CA", ca_key, "hermes test CA", ca_key, ca=True)
    cert = issue(name, key, "hermes test CA", ca_key, ca=False)
    paths = (tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return tuple(str(p) for p in paths)


@pytest.fixture
async def tls_site(tmp_path, monkeypatch):
    """An HTTPS site for secure.test on 127.0.0.1, in this test's loop, whose CA the
    fetch trusts; it records the SNI name each handshake carried."""
    ca, cert, key = tls_files(tmp_path, "secure.test")
    client = ssl.create_default_context(cafile=ca)
    monkeypatch.setattr(web_fetch, "tls", lambda: client)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    sni: list[str | None] = []
    server.sni_callback = lambda connection, name, context: sni.append(name)

    async def serve(stream: trio.SSLStream) -> None:
        request = b""
        try:
            while b"\r\n\r\n" not in request:
                request += await stream.receive_some()
        except trio.BrokenResourceError:  # a client that refused the certificate
            return
        body = b"over TLS"
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                              b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                              % (len(body), body))  # fmt: skip
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_ssl_over_tcp, serve, 0, server, host="127.0.0.1")
        )
        yield listeners[0].transport_listener.socket.getsockname()[1], sni
        nursery.cancel_scope.cancel()


async def test_tls_verifies_and_names_the_host_while_connecting_to_its_address(tls_site, ctx):
    port, sni = tls_site
    names({"secure.test": [["127.0.0.1"]]})
    answer = await fetch(ctx, f"https://secure.test:{port}/", allow=("secure.test",))
    assert (answer["url"], answer["text"]) == (f"https://secure.test:{port}/", "over TLS")
    assert sni == ["secure.test"]


async def test_tls_to_a_name_the_certificate_does_not_cover_is_refused(tls_site, ctx):
    port, sni = tls_site
    names({"other.test": [["127.0.0.1"]]})
    with pytest.raises(ToolError, match="certificate verify failed"):
        await fetch(ctx, f"https://other.test:{port}/", allow=("other.test",))
    assert sni == ["other.test"]
