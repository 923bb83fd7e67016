"""The Signal adapter in this process against the fake signal-cli daemon, over HTTP and
over TCP: what each answer to a send means for its outbox row, files sent as attachments,
what the daemon replays after a reconnect, the progress deadline over a silent stream,
and the account check."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from hermes.actors.clock import Clock
from hermes.actors.link import FATAL
from hermes.adapters.contract import (
    OutFile,
    Permanent,
    RetryAfter,
    SendRequest,
    Sent,
    Target,
    Unconfirmed,
)
from hermes.adapters.cursors import Cursors
from hermes.adapters.signal.adapter import MAX_UPLOAD, SignalAdapter
from hermes.adapters.signal.config import SignalConfig
from hermes.config import Secrets
from tests.adapters.inprocess import Admissions, Running, running
from tests.adapters.serving import in_thread
from tests.fakes.signal import ACCOUNT, ALICE, BOB, FakeSignal


@asynccontextmanager
async def signal(
    daemon: FakeSignal, admissions: Admissions, over: str = "http", state_db=None, **settings: Any
) -> AsyncIterator[Running]:
    """The adapter on the fake daemon, over HTTP or its TCP socket."""
    if over == "http":
        rpc = daemon.url
    else:
        host, port = daemon.tcp_address
        rpc = f"tcp://{host}:{port}"
    config = SignalConfig(rpc=rpc, account=settings.pop("account", ACCOUNT), keepalive=1.0,
                          allowed_users=(ALICE,), **settings)  # fmt: skip
    kept = None if state_db is None else functools.partial(Cursors, REGISTRY[0], state_db, Clock())
    async with running(SignalAdapter, "signal", config, Secrets({}, frozenset()), admissions,
                       cursors=kept) as run:  # fmt: skip
        yield run


REGISTRY: list[Any] = []
UNKNOWN_GROUP = "bm8gc3VjaCBncm91cCBhdCBhbGwgaGVyZSBvciB0aGVyZQ=="


@pytest.fixture
def daemon() -> FakeSignal:
    with FakeSignal(keepalive=1.0, tcp=True) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _registry(registry):
    REGISTRY[:] = [registry]


@pytest.mark.parametrize("over", ["http", "tcp"])
@pytest.mark.timeout(30)
async def test_a_send_is_answered_with_a_typed_result(daemon, over):
    async with signal(daemon, Admissions(), over) as run:
        await run.status.reach("live")

        async def send(text: str, chat: str = ALICE) -> Any:
            return await run.send(SendRequest(Target("signal", chat), text, text))

        taken = await send("taken")
        assert isinstance(taken, Sent) and taken.message_id.endswith(f":{ACCOUNT}")
        daemon.fail("send", -3, "Failed to send message: network")
        failing = await send("failing")
        assert isinstance(failing, RetryAfter) and failing.seconds is None
        refused = await send(
            "no such group", chat="bm8gc3VjaCBncm91cCBhdCBhbGwgaGVyZSBvciB0aGVyZQ=="
        )
        assert isinstance(refused, Permanent) and "Group not found" in refused.reason
    assert [s["message"] for s in daemon.sent] == ["taken"]


def out_file(folder, content: bytes, name: str, mime: str, voice: bool = False) -> OutFile:
    """hermes's copy of a file to send, as the outbox hands it over."""
    path = folder / f"copy-{len(content)}"
    path.write_bytes(content)
    return OutFile(str(path), name, mime, len(content), voice)


@pytest.mark.parametrize("over", ["http", "tcp"])
@pytest.mark.timeout(30)
async def test_a_file_goes_as_an_attachment_with_its_caption(daemon, over, tmp_path):
    chart = bytes(range(256)) * 40
    group = daemon.group("Team", [ALICE, BOB])
    async with signal(daemon, Admissions(), over) as run:
        await run.status.reach("live")
        file = out_file(tmp_path, chart, "the chart; v2+ü.png", "image/png")
        sent = await run.send(SendRequest(Target("signal", ALICE), "here **it** is", "k1",
                                          file=file))  # fmt: skip
        note = out_file(tmp_path, b"OggS spoken", "reply.ogg", "audio/ogg", voice=True)
        spoken = await run.send(SendRequest(Target("signal", group), "", "k2", file=note))
    assert isinstance(sent, Sent) and isinstance(spoken, Sent)
    upload, voice = daemon.uploads
    assert (upload["recipients"], upload["filename"], upload["content_type"]) == (
        [ALICE], "the chart; v2+ü.png", "image/png")  # fmt: skip
    assert upload["content"] == chart and upload["message"] == "here it is"
    assert daemon.sent[0]["text_styles"] == ["5:2:BOLD"]  # the caption styled as a text
    assert (voice["group_id"], voice["content_type"], voice["content"]) == (
        group, "audio/ogg", b"OggS spoken")  # fmt: skip
    assert {u["transport"] for u in daemon.uploads} == {over}


@pytest.mark.parametrize("over", ["http", "tcp"])
@pytest.mark.timeout(60)
async def test_the_largest_file_stays_within_what_signal_cli_parses(daemon, over, tmp_path):
    content = bytes(range(256)) * (MAX_UPLOAD // 256)
    name = "ü" * 127 + ".bin"  # 258 bytes of name, each escaped: the longest data URI
    async with signal(daemon, Admissions(), over) as run:
        await run.status.reach("live")
        file = out_file(tmp_path, content, name, "application/octet-stream")
        sent = await run.send(SendRequest(Target("signal", ALICE), "big", "k", file=file))
    assert isinstance(sent, Sent)
    [upload] = daemon.uploads
    assert upload["size"] == MAX_UPLOAD and upload["filename"] == name
    assert upload["sha256"] == hashlib.sha256(content).hexdigest()
    assert len(daemon.sent[0]["attachments"][0]) < 20_000_000  # Jackson's longest string


@pytest.mark.timeout(30)
async def test_a_file_signal_refuses_is_dead_and_a_lost_answer_unknown(daemon, tmp_path):
    daemon.max_upload = 4
    async with signal(daemon, Admissions()) as run:
        await run.status.reach("live")

        async def send(file: OutFile) -> Any:
            return await run.send(SendRequest(Target("signal", ALICE), "x", "k", file=file))

        refused = await send(out_file(tmp_path, b"12345", "five.txt", "text/plain"))
        assert isinstance(refused, Permanent) and "[413]" in refused.reason
        gone = await send(OutFile(str(tmp_path / "gone"), "gone.txt", "text/plain", 3))
        assert isinstance(gone, Permanent) and "gone" in gone.reason
        small = out_file(tmp_path, b"123", "three.txt", "text/plain")
        daemon.fail("send", http_status=502)  # the daemon's answer is lost: maybe sent
        assert isinstance(await send(small), Unconfirmed)
        daemon.fail("send", -32603, "Failed to send message: boom (IOException)")
        assert isinstance(await send(small), Unconfirmed)  # failed mid-way, as a text's
        assert isinstance(await send(small), Sent)
    assert [u["content"] for u in daemon.uploads] == [b"123"]


@pytest.mark.parametrize("code", [-5, -32603])  # signal-cli's code varies by version
@pytest.mark.timeout(30)
async def test_a_rate_limit_waits_as_long_as_signal_said(daemon, code):
    async with signal(daemon, Admissions()) as run:
        await run.status.reach("live")
        daemon.rate_limit(7, code=code)
        limited = await run.send(SendRequest(Target("signal", ALICE), "x", "k"))
    assert isinstance(limited, RetryAfter) and limited.seconds == 7.0


@pytest.mark.timeout(30)
async def test_an_untrusted_identity_is_dead_and_the_owner_told_once(daemon):
    daemon.untrust(BOB)
    async with signal(daemon, Admissions(), owner=ALICE) as run:
        await in_thread(daemon.wait_connections, 1)
        for n in range(2):
            result = await run.send(SendRequest(Target("signal", BOB), f"to Bob {n}", f"k{n}"))
            assert isinstance(result, Permanent) and "safety number" in result.reason
    [told] = daemon.sent
    assert told["recipients"] == [ALICE] and f"trust -a {BOB}" in told["message"]
    assert not daemon.trusted


@pytest.mark.parametrize("over", ["http", "tcp"])
@pytest.mark.timeout(30)
async def test_a_silent_daemon_misses_the_deadline_and_the_adapter_reconnects(daemon, over):
    admissions = Admissions()
    async with signal(daemon, admissions, over) as run:
        await in_thread(daemon.wait_connections, 1)
        daemon.deafen()
        await run.status.reach("backing off")  # three keep-alives missed
        daemon.undeafen()
        await in_thread(daemon.wait_connections, 2)  # over a socket, none replays the gap
        said = daemon.message(ALICE, "back?")
        await admissions.wait_for(f"{ALICE}:{said['timestamp']}")
        assert run.restarts >= 1


@pytest.mark.timeout(30)
async def test_a_socket_shared_with_another_account_admits_only_hermess(daemon):
    admissions = Admissions()
    async with signal(daemon, admissions, "tcp") as run:
        await run.status.reach("live")
        data = {"timestamp": 1700000000001, "message": "not for hermes"}
        theirs = {"source": BOB, "sourceNumber": BOB, "timestamp": 1700000000001,
                  "dataMessage": data}  # fmt: skip
        daemon.envelope(theirs, account="+15558888888")
        said = daemon.message(ALICE, "for hermes")
        await admissions.wait_for(f"{ALICE}:{said['timestamp']}")
    assert admissions.ids == [f"{ALICE}:{said['timestamp']}"]


@pytest.mark.timeout(30)
async def test_an_account_the_daemon_lacks_is_fatal_and_says_how_to_add_it(daemon):
    async with signal(daemon, Admissions(), account="+15557777777") as run:
        await run.status.reach(FATAL)
        assert "signal-cli link" in run.status.reason and "register" in run.status.reason


@pytest.mark.parametrize("over", ["http", "tcp"])
@pytest.mark.timeout(30)
async def test_a_daemon_restart_is_a_reconnect_not_a_crash(daemon, over):
    admissions = Admissions()
    async with signal(daemon, admissions, over) as run:
        if over == "http":  # the stream worked a while: a keep-alive came
            await in_thread(daemon.wait_until, lambda f: any(s["keepalives"] for s in f.streams))
        else:  # a ping was answered
            await in_thread(daemon.wait_calls, "version", 2)
        daemon.restart()
        await in_thread(daemon.wait_connections, 2)
        said = daemon.message(ALICE, "after the restart")
        await admissions.wait_for(f"{ALICE}:{said['timestamp']}")
        assert run.restarts == 0


@pytest.mark.timeout(30)
async def test_over_a_socket_a_drop_loses_nothing_already_read(daemon):
    admissions = Admissions()
    async with signal(daemon, admissions, "tcp") as run:
        await run.status.reach("live")  # the hello done: messages are taken from now on
        admissions.hold("m0")
        said = [daemon.message(ALICE, f"m{n}") for n in range(5)]
        await in_thread(daemon.wait_delivered, 5)
        await in_thread(daemon.deafen)  # returns once no write is under way: all five sent
        daemon.drop_streams()
        daemon.undeafen()
        admissions.release("m0")
        await admissions.wait_for(*(f"{ALICE}:{m['timestamp']}" for m in said))
