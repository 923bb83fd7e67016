"""Self-tests of the fake signal-cli daemon (tests/fakes/signal.py), driven from the test
thread with httpx and plain sockets as a client would. Event streams are read with a
small raw-socket client (each read bounded by a timeout, so the test can also see that
nothing comes); the fake's waits block on its condition. Nothing sleeps: "silent" means
no byte within a short bounded read, many keep-alive periods long."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.fakes.signal import (
    ACCOUNT,
    ALICE,
    BOB,
    CAROL,
    PLACEHOLDER,
    VERSION,
    FakeSignal,
)

pytestmark = pytest.mark.timeout(30)
KEEPALIVE = 0.05  # seconds: a keep-alive is never long in coming
SILENCE = 0.4  # seconds of reading nothing that count as silence (8 keep-alive periods)


@pytest.fixture
def fake() -> Iterator[FakeSignal]:
    with FakeSignal(keepalive=KEEPALIVE, tcp=True) as signal_cli:
        yield signal_cli
        assert signal_cli.internal_errors == []


def rpc(
    fake: FakeSignal, method: str, params: dict[str, Any] | None = None, *, rid: Any = 1,
    account: bool = True,
) -> httpx.Response:  # fmt: skip
    """One JSON-RPC request over HTTP (`account`: with params.account)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    params = dict(params or {})
    if account:
        params["account"] = ACCOUNT
    if params:
        body["params"] = params
    if rid is not None:
        body["id"] = rid
    return httpx.post(f"{fake.url}/api/v1/rpc", json=body, timeout=5)


def result(fake: FakeSignal, method: str, **params: Any) -> Any:
    answer = rpc(fake, method, params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "error" not in body, body
    return body["result"]


def error(fake: FakeSignal, method: str, **params: Any) -> dict[str, Any]:
    answer = rpc(fake, method, params)
    assert answer.status_code == 200, answer.text
    return answer.json()["error"]


def _received(sock: socket.socket, deadline: float, nothing: str) -> bytes:
    """What the fake sent next, by `deadline` (TimeoutError saying `nothing` after it);
    EOFError once it closed the connection."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(nothing)
    sock.settimeout(left)
    data = sock.recv(65536)
    if not data:
        raise EOFError("the fake closed the connection")
    return data


class Stream:
    """A raw event-stream client on a plain socket: the response head, then one SSE item
    at a time, de-chunked; every read bounded by `timeout` (TimeoutError), EOFError once
    the fake closed the stream."""

    def __init__(
        self, fake: FakeSignal, last_event_id: str | None = None, account: str | None = ACCOUNT
    ) -> None:
        url = urlsplit(fake.url)
        self.sock = socket.create_connection((url.hostname, url.port), timeout=5)
        query = "" if account is None else f"?account={quote(account)}"
        lines = [f"GET /api/v1/events{query} HTTP/1.1", f"Host: {url.netloc}",
                 "Accept: text/event-stream"]  # fmt: skip
        if last_event_id is not None:
            lines.append(f"Last-Event-ID: {last_event_id}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.raw = b""  # received, not yet de-chunked
        self.body = b""  # de-chunked, every byte so far
        self.unparsed = ""  # de-chunked, not yet parsed into SSE lines
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.finished = False  # the last chunk came

    def _fill(self, deadline: float) -> None:
        self.raw += _received(self.sock, deadline, "nothing more on the stream")

    def head(self, timeout: float = 5) -> int:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.raw:
            self._fill(deadline)
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        status_line, *fields = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {k.lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}
        return self.status

    def _line(self, deadline: float) -> str:
        while "\n" not in self.unparsed:
            if self.finished:
                raise EOFError("the stream ended with its last chunk")
            size_end = self.raw.find(b"\r\n")
            if size_end >= 0:
                size = int(self.raw[:size_end], 16)
                if len(self.raw) >= size_end + 2 + size + 2:
                    data = self.raw[size_end + 2 : size_end + 2 + size]
                    self.raw = self.raw[size_end + 2 + size + 2 :]
                    self.body += data
                    self.unparsed += data.decode()
                    self.finished = size == 0
                    continue
            self._fill(deadline)
        line, self.unparsed = self.unparsed.split("\n", 1)
        return line

    def item(self, timeout: float = 5) -> dict[str, Any]:
        """The next keep-alive ({"comment": ""}) or event ({"id", "event", "data"})."""
        if self.status is None:
            self.head(timeout)
        deadline = time.monotonic() + timeout
        fields: dict[str, Any] = {}
        while True:
            line = self._line(deadline)
            if line.startswith(":"):
                if not fields:
                    return {"comment": line[1:]}
                continue
            if line == "":
                if fields:
                    fields["data"] = json.loads(fields["data"])
                    return fields
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value

    def event(self, timeout: float = 5) -> dict[str, Any]:
        """The next event, past keep-alives."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.item(max(0.0, deadline - time.monotonic()))
            if "comment" not in found:
                return found

    def no_event(self, seconds: float = SILENCE) -> None:
        """Nothing but keep-alives for `seconds`."""
        deadline = time.monotonic() + seconds
        with pytest.raises(TimeoutError):
            while True:
                found = self.item(max(0.0, deadline - time.monotonic()))
                assert "comment" in found, f"an unexpected event: {found}"

    def silent(self, seconds: float = SILENCE) -> None:
        """Not a byte for `seconds`, not even a keep-alive."""
        with pytest.raises(TimeoutError):
            found = self.item(seconds)
            pytest.fail(f"the stream was not silent: {found}")

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class Tcp:
    """A JSON-RPC client on the fake's TCP socket: one line a request, one line an
    answer; notifications seen meanwhile are kept in `notifications`."""

    def __init__(self, fake: FakeSignal) -> None:
        assert fake.tcp_address is not None
        self.sock = socket.create_connection(fake.tcp_address, timeout=5)
        self.buffer = b""
        self.notifications: list[dict[str, Any]] = []
        self.lines: list[bytes] = []  # every line, as received

    def send(self, request: dict[str, Any] | bytes) -> None:
        data = request if isinstance(request, bytes) else json.dumps(request).encode() + b"\n"
        self.sock.sendall(data)

    def line(self, timeout: float = 5) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            self.buffer += _received(self.sock, deadline, "no line from the fake")
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(line + b"\n")
        return json.loads(line)

    def notification(self, timeout: float = 5) -> dict[str, Any]:
        if self.notifications:
            return self.notifications.pop(0)
        found = self.line(timeout)
        assert "id" not in found, found
        return found

    def call(self, method: str, params: dict[str, Any] | None = None, rid: Any = 7) -> dict:
        params = {"account": ACCOUNT, **(params or {})}
        self.send({"jsonrpc": "2.0", "method": method, "params": params, "id": rid})
        while True:
            found = self.line()
            if found.get("method") == "receive":
                self.notifications.append(found)
                continue
            assert found["id"] == rid, found
            return found

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# -- RPC over HTTP ----------------------------------------------------------------------


def test_version_accounts_check_and_the_http_rules(fake: FakeSignal):
    assert result(fake, "version") == {"version": VERSION}
    answer = rpc(fake, "listAccounts", account=False, rid="a")
    assert answer.json() == {"jsonrpc": "2.0", "result": [{"number": ACCOUNT}], "id": "a"}
    check = httpx.get(f"{fake.url}/api/v1/check", timeout=5)
    assert (check.status_code, check.content) == (200, b"")
    notification = rpc(fake, "version", rid=None)
    assert (notification.status_code, notification.content) == (201, b"")
    assert [c["method"] for c in fake.calls] == ["version", "listAccounts", "version"]
    assert fake.calls[2]["id"] is None and fake.calls[0]["transport"] == "http"
    unknown = rpc(fake, "updateProfile", {"name": "x"}).json()
    assert unknown["error"] == {"code": -32601, "message": "Method not implemented",
                                "data": None}  # fmt: skip
    plain = httpx.post(f"{fake.url}/api/v1/rpc", content=b"{}", timeout=5,
                       headers={"content-type": "text/plain"})  # fmt: skip
    assert (plain.status_code, plain.content) == (415, b"")
    assert httpx.get(f"{fake.url}/api/v1/rpc", timeout=5).status_code == 405
    assert httpx.get(f"{fake.url}/api/v2/rpc", timeout=5).status_code == 404
    assert httpx.post(f"{fake.url}/api/v1/events", json={}, timeout=5).status_code == 405
    garbage = httpx.post(f"{fake.url}/api/v1/rpc", content=b"{nope", timeout=5,
                         headers={"content-type": "application/json; charset=utf-8"})  # fmt: skip
    assert garbage.json()["error"]["code"] == -32700
    nameless = httpx.post(f"{fake.url}/api/v1/rpc", json={"jsonrpc": "2.0", "id": 3}, timeout=5)
    assert nameless.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "method field must be set", "data": None}}  # fmt: skip
    batch = httpx.post(f"{fake.url}/api/v1/rpc", json=[{"method": "version", "id": 1}], timeout=5)
    assert batch.json()["error"]["code"] == -32600


def test_the_account_parameter(fake: FakeSignal):
    for method in ("send", "sendTyping", "getAttachment", "listGroups", "trust"):
        missing = rpc(fake, method, {"recipient": ALICE}, account=False).json()["error"]
        assert missing == {"code": -32602, "message": "Method requires valid account parameter",
                           "data": None}, method  # fmt: skip
        other = rpc(fake, method, {"account": "+15559999999", "recipient": ALICE},
                    account=False).json()["error"]  # fmt: skip
        assert other["code"] == -32602 and other["message"] == "Specified account does not exist"
    assert result(fake, "listGroups") == []
    assert fake.sent == [] and fake.typing_sent == []


def test_a_send_and_what_it_records(fake: FakeSignal):
    text = "hi 👋 bold"
    answer = result(fake, "send", recipient=ALICE, message=text,
                    textStyle=["6:4:BOLD", "3:2:ITALIC"], quoteTimestamp=1700000000000,
                    quoteAuthor=ALICE, quoteMessage="earlier",
                    attachments=["data:image/png;filename=a.png;base64,iVBORw0K"])  # fmt: skip
    assert isinstance(answer["timestamp"], int)
    assert answer["results"] == [{"recipientAddress": {"uuid": fake.uuid_of(ALICE),
                                                       "number": ALICE, "username": None},
                                  "type": "SUCCESS"}]  # fmt: skip
    [sent] = fake.wait_sent(1, to=ALICE)
    assert sent["recipients"] == [ALICE] and sent["group_id"] is None
    assert sent["message"] == text and sent["text_styles"] == ["6:4:BOLD", "3:2:ITALIC"]
    assert sent["styled"] == [["BOLD", "bold"], ["ITALIC", "👋"]]  # UTF-16 code units
    assert (sent["quote_timestamp"], sent["quote_author"], sent["quote_message"]) == (
        1700000000000, ALICE, "earlier")  # fmt: skip
    assert sent["attachments"] == ["data:image/png;filename=a.png;base64,iVBORw0K"]
    assert sent["timestamp"] == answer["timestamp"] and sent["transport"] == "http"
    edit = result(fake, "send", recipient=[ALICE, BOB], message="fixed",
                  editTimestamp=answer["timestamp"])  # fmt: skip
    assert edit["timestamp"] > answer["timestamp"]
    assert [r["recipientAddress"]["number"] for r in edit["results"]] == [ALICE, BOB]
    assert fake.sent[1]["edit_timestamp"] == answer["timestamp"]
    group = fake.group("Family", [ALICE, BOB])
    grouped = result(fake, "send", groupId=group, message="to all")
    assert [(r["recipientAddress"]["number"], r["groupId"], r["type"])
            for r in grouped["results"]] == [(ALICE, group, "SUCCESS"),
                                             (BOB, group, "SUCCESS")]  # fmt: skip
    assert fake.sent_to(group)[0]["message"] == "to all"
    by_uuid = result(fake, "send", recipient=fake.uuid_of(BOB), message="by uuid")
    assert by_uuid["results"][0]["recipientAddress"]["number"] == BOB
    assert error(fake, "send", recipient=ALICE, message="") == {"code": -1, "data": None,
        "message": "Sending empty message is not allowed, either a message, attachment or "
                   "sticker must be given."}  # fmt: skip
    assert error(fake, "send", message="x")["message"] == "No recipients given"
    assert error(fake, "send", groupId="bm9wZQ==", message="x") == {
        "code": -1, "message": "Group not found: bm9wZQ==", "data": None}  # fmt: skip
    assert error(fake, "send", recipient=ALICE, message=3)["code"] == -32602
    assert len(fake.sent) == 4
    timestamps = [s["timestamp"] for s in fake.sent]
    assert timestamps == sorted(set(timestamps))
    assert result(fake, "sendTyping", recipient=ALICE) == {}
    assert result(fake, "sendTyping", groupId=group, stop=True) == {}
    assert [(t["recipients"], t["group_id"], t["stop"]) for t in fake.typing_sent] == [
        ([ALICE], None, False), ([], group, True)]  # fmt: skip
    assert error(fake, "sendTyping", groupId="bm9wZQ==")["message"] == (
        "Failed to send to group: Group not found: bm9wZQ==")  # fmt: skip


def test_text_style_validation(fake: FakeSignal):
    bad = error(fake, "send", recipient=ALICE, message="hello", textStyle="0:5")
    assert bad["code"] == -1
    assert bad["message"] == "Invalid textStyle syntax (0:5) expected 'start:length:STYLE'"
    assert error(fake, "send", recipient=ALICE, message="hello",
                 textStyle="0:5:LOUD")["message"] == "Invalid style: LOUD"  # fmt: skip
    assert error(fake, "send", recipient=ALICE, message="hello",
                 textStyle="-1:5:BOLD")["code"] == -1  # fmt: skip
    assert fake.sent == []
    # one style as a single value; ranges past the end or through a surrogate pair are
    # sent (signal-cli does not check them) and shown as None
    styles = ["0:1:MONOSPACE", "1:1:SPOILER", "2:9:BOLD", "1:2:STRIKETHROUGH"]
    result(fake, "send", recipient=ALICE, message="a😀b", textStyles=styles)
    assert fake.sent[0]["styled"] == [["MONOSPACE", "a"], ["SPOILER", None], ["BOLD", None],
                                      ["STRIKETHROUGH", "😀"]]  # fmt: skip
    result(fake, "send", recipient=ALICE, message="plain", textStyle="0:5:ITALIC")
    assert fake.sent[1]["styled"] == [["ITALIC", "plain"]]


def test_attachments_and_groups(fake: FakeSignal):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    picture = fake.attachment(png, "image/png", "cat.png")
    assert picture["id"].endswith(".png") and picture["size"] == len(png)
    assert (picture["contentType"], picture["filename"]) == ("image/png", "cat.png")
    group = fake.group("Pets", [ALICE, CAROL])
    envelope = fake.message(ALICE, "look", group=group, attachments=[picture])
    assert envelope["dataMessage"]["attachments"] == [picture]
    got = result(fake, "getAttachment", id=picture["id"], groupId=group)
    assert base64.b64decode(got["data"]) == png
    assert fake.attachment_reads[0]["id"] == picture["id"]
    assert fake.attachment_reads[0]["group_id"] == group
    missing = error(fake, "getAttachment", id="nope.png", recipient=ALICE)
    assert missing == {"code": -1, "data": None,
                       "message": "Could not find attachment with ID: nope.png"}  # fmt: skip
    assert error(fake, "getAttachment", recipient=ALICE)["code"] == -32602
    assert result(fake, "listGroups") == [{
        "id": group, "name": "Pets", "description": "", "isMember": True, "isBlocked": False,
        "messageExpirationTime": 0,
        "members": [{"number": n, "uuid": fake.uuid_of(n)} for n in (ACCOUNT, ALICE, CAROL)],
        "pendingMembers": [], "requestingMembers": [],
        "admins": [{"number": ACCOUNT, "uuid": fake.uuid_of(ACCOUNT)}], "banned": [],
        "groupInviteLink": None,
    }]  # fmt: skip
    assert len(base64.b64decode(group)) == 32


def data_uri(content: bytes, mime: str, name: str | None) -> str:
    named = "" if name is None else f";filename={quote(name, safe='')}"
    return f"data:{mime}{named};base64,{base64.b64encode(content).decode()}"


def test_a_sends_attachments_are_recorded_as_uploads(fake: FakeSignal, tmp_path):
    content = bytes(range(256)) * 8 + "ü".encode()
    name = "the chart, v2+ü.pdf"  # each of , + ü escaped, as signal-cli URL-decodes it
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"plain notes")
    group = fake.group("Team", [ALICE, BOB])
    pdf = data_uri(content, "application/pdf", name)
    answer = result(fake, "send", groupId=group, message="two files", attachments=[pdf, str(notes)])
    first, second = fake.wait_uploads(2)
    assert first == {
        "recipients": [], "group_id": group, "filename": name,
        "content_type": "application/pdf", "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(), "source": "data",
        "message": "two files", "timestamp": answer["timestamp"], "transport": "http",
        "at": first["at"], "content": content,
    }  # fmt: skip
    assert (second["filename"], second["content_type"], second["content"], second["source"]) == (
        "notes.txt", "text/plain", b"plain notes", "path")  # fmt: skip
    assert fake.sent[0]["attachments"][1] == str(notes)  # as given
    tcp = Tcp(fake)
    try:  # one attachment alone, over the socket; without a filename its type's default
        voice = tcp.call("send", {"recipient": ALICE, "attachment": data_uri(
            b"OggS voice", "audio/ogg", "note.ogg")})  # fmt: skip
        assert voice["result"]["results"][0]["type"] == "SUCCESS"
        bare = tcp.call("send", {"recipient": ALICE, "attachments": [
            "data:;filename=x;base64,aGk="]})  # fmt: skip
        assert "result" in bare
    finally:
        tcp.close()
    voice_note, unnamed = fake.wait_uploads(4)[2:]
    assert (voice_note["recipients"], voice_note["message"], voice_note["content"]) == (
        [ALICE], "", b"OggS voice")  # fmt: skip
    assert voice_note["transport"] == "tcp" and voice_note["content_type"] == "audio/ogg"
    assert (unnamed["content_type"], unnamed["content"]) == ("text/plain", b"hi")
    assert fake.refused == []


def test_an_attachment_without_a_parameter_is_text_as_signal_cli_reads_it(fake: FakeSignal):
    result(fake, "send", recipient=ALICE, attachments=[data_uri(b"hi", "image/png", None)])
    [upload] = fake.wait_uploads(1)
    assert upload["filename"] is None and upload["content"] == b"aGk="  # not decoded


def test_attachments_refused_as_signal_cli_refuses_them(fake: FakeSignal, tmp_path):
    fake.max_upload = 10
    too_large = error(fake, "send", recipient=ALICE, message="big",
                      attachments=[data_uri(b"x" * 11, "text/plain", "big.txt")])  # fmt: skip
    assert too_large["code"] == -32603 and too_large["data"] is None
    cdn = "url=https://cdn3.signal.org/upload/attachments/"
    said = "Failed to send message: [413] Response: Response{protocol=h2, code=413, message=, "
    assert too_large["message"].startswith(said + cdn)
    assert too_large["message"].endswith("} (NonSuccessfulResponseCodeException)")
    big = tmp_path / "big.bin"
    big.write_bytes(b"y" * 11)
    assert error(fake, "send", recipient=ALICE, attachment=str(big))["message"].startswith(
        "Failed to send message: [413]")  # fmt: skip
    exactly = result(fake, "send", recipient=ALICE, attachment=data_uri(b"z" * 10, "a/b", "ok"))
    assert exactly["results"][0]["type"] == "SUCCESS"
    gone = error(fake, "send", recipient=ALICE, message="x", attachment=str(tmp_path / "no"))
    assert gone["code"] == -32603 and gone["message"].endswith("(AttachmentInvalidException)")
    broken = error(fake, "send", recipient=ALICE, attachment="data:image/png;filename=a;base64")
    assert broken["message"] == ("Failed to send message: data:image/png;filename=a;base64: The "
                                 "given string is not a valid data URI. "
                                 "(AttachmentInvalidException)")  # fmt: skip
    not_base64 = error(fake, "send", recipient=ALICE,
                       attachment="data:a/b;filename=c;base64," + "*" * 100)  # fmt: skip
    assert "Illegal base64 character" in not_base64["message"]
    assert "…:" in not_base64["message"]  # the data URI cut to 64 characters
    assert [(r["kind"], r["code"]) for r in fake.refused] == [("too_large", -32603)] * 2
    assert [u["size"] for u in fake.uploads] == [10] and len(fake.sent) == 1
    with pytest.raises(TimeoutError, match="2 attachment\\(s\\) sent"):
        fake.wait_uploads(2, timeout=0.05)
    state = httpx.get(f"{fake.url}/_fake/state", timeout=5).json()["result"]
    assert state["uploads"][0]["size"] == 10 and "content" not in state["uploads"][0]


def test_incoming_envelopes(fake: FakeSignal):
    group = fake.group("Team", [ALICE, BOB])
    text = f"👋 {PLACEHOLDER} and {PLACEHOLDER}, see"
    hello = fake.message(ALICE, text, group=group, mentions=[(ACCOUNT, 3, 1), BOB],
                         quote=(BOB, 1700000000000, "before"))  # fmt: skip
    assert hello["source"] == hello["sourceNumber"] == ALICE
    assert (hello["sourceUuid"], hello["sourceName"], hello["sourceDevice"]) == (
        fake.uuid_of(ALICE), "Alice", 1)  # fmt: skip
    data = hello["dataMessage"]
    assert data["timestamp"] == hello["timestamp"] and data["message"] == text
    assert (data["expiresInSeconds"], data["viewOnce"]) == (0, False)
    assert data["mentions"] == [
        {"name": ACCOUNT, "number": ACCOUNT, "uuid": fake.uuid_of(ACCOUNT), "start": 3,
         "length": 1},
        {"name": BOB, "number": BOB, "uuid": fake.uuid_of(BOB), "start": 9, "length": 1},
    ]  # fmt: skip
    assert data["quote"] == {"id": 1700000000000, "author": BOB, "authorNumber": BOB,
                             "authorUuid": fake.uuid_of(BOB), "text": "before",
                             "attachments": []}  # fmt: skip
    assert data["groupInfo"] == {"groupId": group, "groupName": "Team", "revision": 1,
                                 "type": "DELIVER"}  # fmt: skip
    assert "attachments" not in data  # as signal-cli: no empty lists
    with pytest.raises(ValueError, match="U\\+FFFC"):
        fake.message(ALICE, "no placeholder", mentions=[(ACCOUNT, 0, 1)])
    with pytest.raises(ValueError, match="not a member"):
        fake.message(CAROL, "intruder", group=group)
    direct = fake.message(BOB, "reply", quote=hello, source_name="Bobby", timestamp=42)
    assert direct["timestamp"] == 42 and direct["sourceName"] == "Bobby"
    assert direct["dataMessage"]["quote"]["id"] == hello["timestamp"]
    assert "groupInfo" not in direct["dataMessage"]
    like = fake.reaction(ALICE, "👍", ACCOUNT, 1234)
    assert like["dataMessage"]["reaction"] == {
        "emoji": "👍", "targetAuthor": ACCOUNT, "targetAuthorNumber": ACCOUNT,
        "targetAuthorUuid": fake.uuid_of(ACCOUNT), "targetSentTimestamp": 1234,
        "isRemove": False}  # fmt: skip
    assert like["dataMessage"]["message"] is None
    seen = fake.receipt(ALICE, [1234, 1235], "READ")
    assert seen["receiptMessage"] == {"when": seen["timestamp"], "isDelivery": False,
                                      "isRead": True, "isViewed": False,
                                      "timestamps": [1234, 1235]}  # fmt: skip
    typing = fake.typing(BOB, group=group)
    assert typing["typingMessage"] == {"action": "STARTED", "timestamp": typing["timestamp"],
                                       "groupId": group}  # fmt: skip
    edit = fake.edit(ALICE, hello["timestamp"], "fixed", group=group)
    assert edit["editMessage"]["targetSentTimestamp"] == hello["timestamp"]
    assert edit["editMessage"]["dataMessage"]["message"] == "fixed"
    mine = fake.sync_sent(ALICE, "from my phone")
    assert (mine["source"], mine["sourceDevice"]) == (ACCOUNT, 2)
    assert mine["syncMessage"]["sentMessage"]["destinationNumber"] == ALICE
    assert mine["syncMessage"]["sentMessage"]["message"] == "from my phone"
    raw = fake.envelope({"source": ALICE, "storyMessage": {}})
    assert isinstance(raw["timestamp"], int)
    assert [e["timestamp"] for e in fake.pending] == [
        e["timestamp"] for e in (hello, direct, like, seen, typing, edit, mine, raw)
    ]


# -- RPC and notifications over TCP ---------------------------------------------------------


def test_json_rpc_over_tcp(fake: FakeSignal):
    tcp = Tcp(fake)
    try:
        tcp.send(b'{"jsonrpc":"2.0","method":"version","id":1}\n\n')
        assert tcp.line() == {"jsonrpc": "2.0", "result": {"version": VERSION}, "id": 1}
        assert tcp.lines[0] == b'{"jsonrpc":"2.0","result":{"version":"0.13.12"},"id":1}\n'
        tcp.send({"jsonrpc": "2.0", "method": "sendTyping",
                  "params": {"account": ACCOUNT, "recipient": ALICE}})  # fmt: skip
        sent = tcp.call("send", {"recipient": ALICE, "message": "over tcp"}, rid="s")
        assert sent["result"]["results"][0]["type"] == "SUCCESS"  # the typing had no answer
        assert fake.typing_sent[0]["transport"] == "tcp"
        assert fake.sent[0]["transport"] == "tcp" and fake.sent[0]["message"] == "over tcp"
        picture = fake.attachment(b"bytes", "image/jpeg", "x.jpg")
        got = tcp.call("getAttachment", {"id": picture["id"], "recipient": ALICE})
        assert base64.b64decode(got["result"]["data"]) == b"bytes"
        tcp.send({"jsonrpc": "2.0", "method": "listGroups", "id": 9})
        assert tcp.line()["error"]["message"] == "Method requires valid account parameter"
        tcp.send(b"not json\n")
        assert tcp.line()["error"]["code"] == -32700
        fake.fail("send", -3, "Failed to send message: IO (IOException)", transport="tcp")
        over_http = result(fake, "send", recipient=ALICE, message="http is fine")
        assert over_http["results"][0]["type"] == "SUCCESS"
        failed = tcp.call("send", {"recipient": ALICE, "message": "x"})
        assert failed["error"]["code"] == -3 and failed["error"]["data"] is None
        assert failed["error"]["message"] == "Failed to send message: IO (IOException)"
        assert [c["transport"] for c in fake.calls][:2] == ["tcp", "tcp"]
    finally:
        tcp.close()
    fake.wait_open_streams(0)


def test_tcp_clients_get_messages_as_notifications(fake: FakeSignal):
    early = fake.message(ALICE, "while nobody listened")
    first = Tcp(fake)
    second: Tcp | None = None
    try:
        pushed = first.notification()
        assert pushed == {"jsonrpc": "2.0", "method": "receive",
                          "params": {"envelope": early, "account": ACCOUNT}}  # fmt: skip
        assert first.lines[0].startswith(b'{"jsonrpc":"2.0","method":"receive","params":{')
        assert fake.pending == []
        second = Tcp(fake)
        fake.wait_connections(2)
        later = fake.message(BOB, "to both")
        for client in (first, second):
            assert client.notification()["params"]["envelope"] == later
        delivered = fake.wait_delivered(3)
        assert [(d["id"], d["transport"], d["timestamp"]) for d in delivered] == [
            (None, "tcp", early["timestamp"]), (None, "tcp", later["timestamp"]),
            (None, "tcp", later["timestamp"])]  # fmt: skip
        # received while only TCP clients listened: kept for event streams too
        assert [b["timestamp"] for b in fake.buffered] == [early["timestamp"],
                                                            later["timestamp"]]  # fmt: skip
    finally:
        first.close()
        if second is not None:
            second.close()
    fake.wait_open_streams(0)
    assert fake.connections == 2


# -- the event stream -------------------------------------------------------------------------


def test_an_sse_client_gets_a_message_with_its_id_and_keepalives(fake: FakeSignal):
    url = f"{fake.url}/api/v1/events"
    with httpx.stream("GET", url, params={"account": ACCOUNT}, timeout=5) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["transfer-encoding"] == "chunked"
        fake.wait_connections(1)
        sent = fake.message(ALICE, "hello hermes")
        lines: list[str] = []
        for line in response.iter_lines():
            lines.append(line)
            if any(x.startswith("data:") for x in lines) and lines[-1] == ":":
                break
    event = [x for x in lines if x != ":"][:4]
    [kept] = fake.buffered
    data = json.dumps({"envelope": sent, "account": ACCOUNT}, separators=(",", ":"),
                      ensure_ascii=False)  # fmt: skip
    assert event == [f"id:{kept['id']}", "event:receive", f"data:{data}", ""]
    run, seq = kept["id"].split("-")
    assert int(run) > 0 and seq == "1"
    fake.wait_open_streams(0)
    [delivered] = fake.delivered
    assert delivered["id"] == kept["id"] and delivered["timestamp"] == sent["timestamp"]
    assert delivered["transport"] == "sse" and delivered["replay"] is False
    assert fake.streams[0]["keepalives"] >= 1 and fake.last_event_ids == [None]


def test_the_exact_frames_and_the_account_query(fake: FakeSignal):
    stream = Stream(fake)
    try:
        assert stream.head() == 200
        assert stream.item() == {"comment": ""}
        sent = fake.message(BOB, "x\ny")
        event = stream.event()
        assert event["event"] == "receive" and event["data"]["envelope"] == sent
        data = json.dumps({"envelope": sent, "account": ACCOUNT}, separators=(",", ":"))
        frame = f"id:{event['id']}\nevent:receive\ndata:{data}\n\n".encode()
        assert frame in stream.body and stream.body.startswith(b":\n")
        assert set(stream.body.replace(frame, b"").split(b":\n")) == {b""}  # keep-alives
    finally:
        stream.close()
    url = urlsplit(fake.url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as raw:
        raw.sendall(f"GET /api/v1/events?account={ACCOUNT} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert raw.recv(100).startswith(b"HTTP/1.1 400 ")  # "+" is a space in a query
    other = Stream(fake, account="+15559999999")
    try:
        assert other.head() == 400
    finally:
        other.close()
    everyone = Stream(fake, account=None)
    try:
        assert everyone.head() == 200
    finally:
        everyone.close()


def test_a_message_waits_for_a_client_then_is_delivered(fake: FakeSignal):
    first = fake.message(ALICE, "one")
    second = fake.message(BOB, "two")
    assert fake.pending == [first, second] and fake.delivered == [] and fake.buffered == []
    stream = Stream(fake)
    try:
        got = [stream.event(), stream.event()]
        assert [g["data"]["envelope"] for g in got] == [first, second]
        assert fake.pending == []
        ids = [g["id"] for g in got]
        assert [d["id"] for d in fake.wait_delivered(2)] == ids
        assert ids[0].split("-")[0] == ids[1].split("-")[0]
        assert [int(i.split("-")[1]) for i in ids] == [1, 2]
    finally:
        stream.close()
    fake.wait_open_streams(0)
    third = fake.message(ALICE, "three")
    assert fake.pending == [third]  # nobody connected: not received


def test_last_event_id_replays_what_came_after_it(fake: FakeSignal):
    stream = Stream(fake)
    try:
        sent = [fake.message(ALICE, f"m{n}") for n in range(3)]
        ids = [stream.event()["id"] for _ in sent]
    finally:
        stream.close()
    fake.wait_open_streams(0)
    fourth = fake.message(BOB, "while away")  # pending: nobody connected
    again = Stream(fake, last_event_id=ids[0])
    try:
        replayed = [again.event() for _ in range(3)]
        assert [r["id"] for r in replayed][:2] == ids[1:]
        assert [r["data"]["envelope"] for r in replayed] == sent[1:] + [fourth]
        assert replayed[2]["id"] == ids[0].split("-")[0] + "-4"
        unknown = Stream(fake, last_event_id="bogus")
        try:
            assert [unknown.event()["data"]["envelope"] for _ in range(4)] == sent + [fourth]
        finally:
            unknown.close()
        latest = Stream(fake, last_event_id=replayed[2]["id"])
        try:
            latest.head()
            latest.no_event()  # nothing after the newest
        finally:
            latest.close()
    finally:
        again.close()
    assert fake.last_event_ids == [None, ids[0], "bogus", replayed[2]["id"]]
    assert [(d["replay"], d["timestamp"]) for d in fake.delivered[3:6]] == [
        (True, sent[1]["timestamp"]), (True, sent[2]["timestamp"]),
        (False, fourth["timestamp"])]  # fmt: skip


def test_drop_streams_keeps_the_buffer(fake: FakeSignal):
    stream = Stream(fake)
    try:
        first = fake.message(ALICE, "one")
        got = stream.event()
        fake.drop_streams()
        with pytest.raises(EOFError):
            while True:
                stream.item()
        assert stream.finished is False  # cut, no last chunk
    finally:
        stream.close()
    fake.wait_open_streams(0)
    assert fake.streams[0]["closed_by"] == "drop"
    second = fake.message(ALICE, "two")
    back = Stream(fake, last_event_id=got["id"])
    try:
        assert back.event()["data"]["envelope"] == second
        fake.drop_streams(graceful=True)
        with pytest.raises(EOFError):
            while True:
                back.item()
        assert back.finished is True  # the last chunk came first
    finally:
        back.close()
    assert [b["timestamp"] for b in fake.buffered] == [first["timestamp"], second["timestamp"]]


def test_restart_loses_the_buffer_and_keeps_pending_messages(fake: FakeSignal):
    stream = Stream(fake)
    tcp = Tcp(fake)
    fake.wait_connections(2)
    try:
        first = fake.message(ALICE, "before the restart")
        got = stream.event()
        assert tcp.notification()["params"]["envelope"] == first
        fake.restart()
        with pytest.raises(EOFError):
            while True:
                stream.item()
        with pytest.raises(EOFError):
            tcp.line()
    finally:
        stream.close()
        tcp.close()
    fake.wait_open_streams(0)
    assert {s["closed_by"] for s in fake.streams} == {"restart"}
    assert fake.buffered == []
    waiting = fake.message(BOB, "sent during the restart")
    fake.restart()  # again, with a message pending: it stays
    assert fake.pending == [waiting]
    back = Stream(fake, last_event_id=got["id"])  # an id of the old run: unknown
    try:
        event = back.event()
        assert event["data"]["envelope"] == waiting  # the first is not replayed: lost
        assert event["id"].endswith("-1") and event["id"] != got["id"]
        assert int(event["id"].split("-")[0]) > int(got["id"].split("-")[0])
        back.no_event()
    finally:
        back.close()


def test_deafen_keeps_streams_open_but_silent(fake: FakeSignal):
    stream = Stream(fake)
    tcp = Tcp(fake)
    fake.wait_connections(2)
    try:
        assert stream.item() == {"comment": ""}
        fake.deafen()
        written = fake.streams[0]["keepalives"]
        for _ in range(written - 1):  # whatever was written before deafen() returned
            assert stream.item() == {"comment": ""}
        first = fake.message(ALICE, "into the void")
        stream.silent()
        tcp.send({"jsonrpc": "2.0", "method": "version", "id": 1})
        with pytest.raises(TimeoutError):
            tcp.line(SILENCE)
        late = Stream(fake)  # accepted, counted, but not even its headers come
        fake.wait_connections(3)
        with pytest.raises(TimeoutError):
            late.head(SILENCE)
        assert fake.open_streams == 3 and fake.deaf is True
        assert fake.streams[0]["keepalives"] == written and fake.delivered == []
        assert [b["timestamp"] for b in fake.buffered] == [first["timestamp"]]
        assert result(fake, "version") == {"version": VERSION}  # HTTP calls still answer
        fake.undeafen()
        assert stream.event()["data"]["envelope"] == first
        pushed, answered = tcp.line(), tcp.line()  # in the order they were queued
        assert pushed["params"]["envelope"] == first
        assert answered == {"jsonrpc": "2.0", "result": {"version": VERSION}, "id": 1}
        assert late.head() == 200
        assert late.item() == {"comment": ""}  # joined after the message: no event
        late.close()
    finally:
        stream.close()
        tcp.close()


# -- errors on demand ---------------------------------------------------------------------------


def test_untrusted_identities_until_trusted(fake: FakeSignal):
    fake.untrust(ALICE)
    refused = error(fake, "send", recipient=ALICE, message="hi")
    assert refused["code"] == -4
    assert refused["message"] == "Failed to send message due to untrusted identities"
    response = refused["data"]["response"]
    assert response["results"] == [{"recipientAddress": {"uuid": fake.uuid_of(ALICE),
                                                         "number": ALICE, "username": None},
                                    "type": "IDENTITY_FAILURE"}]  # fmt: skip
    assert isinstance(response["timestamp"], int) and fake.sent == []
    group = fake.group("Mixed", [ALICE, BOB])
    mixed = result(fake, "send", groupId=group, message="to both")
    assert [r["type"] for r in mixed["results"]] == ["IDENTITY_FAILURE", "SUCCESS"]
    assert error(fake, "trust", recipient=ALICE)["code"] == -1  # neither way of trusting
    assert result(fake, "trust", recipient=ALICE, trustAllKnownKeys=True) == {}
    assert [(t["recipient"], t["all_keys"]) for t in fake.trusted] == [(ALICE, True)]
    assert result(fake, "send", recipient=ALICE, message="hi")["results"][0]["type"] == "SUCCESS"
    assert [(r["method"], r["kind"], r["code"]) for r in fake.refused] == [("send", "untrusted",
                                                                             -4)]  # fmt: skip


def test_rate_limits_and_failures_on_demand(fake: FakeSignal):
    fake.rate_limit(30)
    limited = error(fake, "send", recipient=[ALICE, BOB], message="hi")
    assert limited["code"] == -5
    assert limited["message"] == "Failed to send message due to rate limiting"
    results = limited["data"]["response"]["results"]
    assert [(r["type"], r["retryAfterSeconds"]) for r in results] == [
        ("RATE_LIMIT_FAILURE", 30), ("RATE_LIMIT_FAILURE", 30)]  # fmt: skip
    assert results[0]["recipientAddress"]["number"] == ALICE
    assert result(fake, "send", recipient=ALICE, message="hi")["results"][0]["type"] == "SUCCESS"
    fake.fail("send", -32603, "boom", times=2, data={"why": "test"})
    for _ in range(2):
        assert error(fake, "send", recipient=ALICE, message="x") == {
            "code": -32603, "message": "boom", "data": {"why": "test"}}  # fmt: skip
    fake.fail("sendTyping", http_status=503)
    typing = rpc(fake, "sendTyping", {"recipient": ALICE})
    assert (typing.status_code, typing.content) == (503, b"")
    fake.fail("check", http_status=500)
    assert httpx.get(f"{fake.url}/api/v1/check", timeout=5).status_code == 500
    assert httpx.get(f"{fake.url}/api/v1/check", timeout=5).status_code == 200
    fake.fail("events", http_status=503)
    refused = Stream(fake)
    try:
        assert refused.head() == 503
    finally:
        refused.close()
    assert fake.connections == 0
    with pytest.raises(ValueError):
        fake.fail("events", -1)
    with pytest.raises(ValueError):
        fake.fail("send", http_status=500, transport="tcp")
    assert [(r["method"], r["kind"], r["code"], r["http_status"]) for r in fake.refused] == [
        ("send", "rate_limit", -5, None), ("send", "error", -32603, None),
        ("send", "error", -32603, None), ("sendTyping", "http", None, 503),
        ("check", "http", None, 500), ("events", "http", None, 503)]  # fmt: skip
    assert len(fake.sent) == 1 and fake.typing_sent == []


def test_waits_name_what_they_waited_for(fake: FakeSignal):
    with pytest.raises(TimeoutError, match="1 send\\(s\\) to " + ALICE.replace("+", "\\+")):
        fake.wait_sent(1, timeout=0.05, to=ALICE)
    with pytest.raises(TimeoutError, match="2 send call"):
        fake.wait_calls("send", 2, timeout=0.05)
    with pytest.raises(TimeoutError, match="connection"):
        fake.wait_connections(1, timeout=0.05)
    with pytest.raises(TimeoutError, match="delivered"):
        fake.wait_delivered(1, timeout=0.05)


# -- another process ------------------------------------------------------------------------------


def test_the_fake_controls_over_http(fake: FakeSignal):
    control = f"{fake.url}/_fake"
    group = httpx.post(f"{control}/group", json={"name": "Remote", "members": [ALICE]},
                       timeout=5).json()  # fmt: skip
    assert group["ok"] is True
    message = httpx.post(f"{control}/message", timeout=5, json={
        "source": ALICE, "text": f"hi {PLACEHOLDER}", "group": group["result"],
        "mentions": [[ACCOUNT, 3, 1]]}).json()  # fmt: skip
    assert message["ok"] is True
    assert message["result"]["dataMessage"]["mentions"][0]["number"] == ACCOUNT
    assert httpx.post(f"{control}/untrust", json={"number": BOB}, timeout=5).json()["ok"]
    bad = httpx.post(f"{control}/message", json={"source": ALICE}, timeout=5)
    assert bad.status_code == 400 and "TypeError" in bad.json()["error"]
    assert httpx.post(f"{control}/attachment", json={}, timeout=5).status_code == 404
    state = httpx.get(f"{control}/state", timeout=5).json()["result"]
    assert state["pending"] == [message["result"]] and state["sent"] == []
    assert state["tcp_address"] == list(fake.tcp_address or ())
    assert state["connections"] == 0 and state["internal_errors"] == []


def test_the_fake_runs_in_its_own_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.signal", "--tcp", "--keepalive", "0.1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        pushed = httpx.post(f"{url}/_fake/message", json={"source": BOB, "text": "hi"},
                            timeout=5).json()  # fmt: skip
        assert pushed["ok"] is True
        params = {"account": ACCOUNT, "recipient": BOB, "message": "hello"}
        answer = httpx.post(f"{url}/api/v1/rpc", timeout=5, json={
            "jsonrpc": "2.0", "method": "send", "id": 1, "params": params}).json()  # fmt: skip
        assert answer["result"]["results"][0]["type"] == "SUCCESS"
        state = httpx.get(f"{url}/_fake/state", timeout=5).json()["result"]
        assert state["pending"] == [pushed["result"]]
        assert [s["message"] for s in state["sent"]] == ["hello"]
        assert state["tcp_address"][0] == "127.0.0.1"
    finally:
        proc.terminate()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
