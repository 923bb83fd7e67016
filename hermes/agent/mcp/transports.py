"""The two ways to an MCP server, as the SDK's session wants them: a pair of message
streams, and an event set when the server is gone (with why).

stdio: the server is a child process run by the terminal layer (`spawned`: its own
session and process group, so leaving the block by any way kills its whole tree),
framed as one JSON-RPC message per line, its stderr kept for the reason it died.
Streamable HTTP: the SDK's own client transport over an httpx client that carries
the configured headers; a transport error ends the connection.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import anyio
import attrs
import httpx
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from hermes.agent.mcp.settings import McpServerConfig
from hermes.terminal.backends.base import Launch
from hermes.terminal.command import spawned
from hermes.terminal.output import RingBuffer

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 * 1024 * 1024  # bytes of one line from a stdio server; more ends it
STDERR_KEPT = 2_000  # characters of a server's stderr kept for why it stopped
HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)  # the SDK's: a response stream stays open


@attrs.define(eq=False)
class Transport:
    """What the session runs over: `read`/`write` for the SDK, `ended` set with `why`
    when the server is gone."""

    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    ended: trio.Event = attrs.Factory(trio.Event)
    why: str = ""

    def end(self, why: str) -> None:
        if not self.ended.is_set():
            self.why = why
            self.ended.set()


@contextlib.asynccontextmanager
async def stdio_transport(
    config: McpServerConfig, cwd: Path, env: Mapping[str, str], redact: Callable[[str], str]
) -> AsyncIterator[Transport]:
    """The server's process for the block's life; its tree is killed when it ends. `cwd`
    must exist (a missing one fails the start, naming it)."""
    assert config.command is not None
    launch = Launch((config.command, *config.args), cwd, env)
    async with spawned(launch, stdin=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        process = child.process
        to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        transport = Transport(read, write)
        stderr = RingBuffer(STDERR_KEPT)

        async def exited() -> None:
            code = await process.wait()
            with trio.move_on_after(0.5):  # its last words on stderr, if they are coming
                await stderr_done.wait()
            last = redact(stderr.tail(STDERR_KEPT)).strip().splitlines()
            said = f": {last[-1][:300]}" if last else ""
            transport.end(f"the server exited with status {code}{said}")

        stderr_done = trio.Event()

        async def keep_stderr() -> None:
            try:
                async for chunk in process.stderr:
                    stderr.write(chunk.decode("utf-8", "replace"))
            finally:
                stderr_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_lines, process.stdout, to_session, transport)
            nursery.start_soon(_write_lines, from_session, process.stdin, transport)
            nursery.start_soon(keep_stderr)
            nursery.start_soon(exited)
            try:
                yield transport
            finally:
                nursery.cancel_scope.cancel()


async def _read_lines(
    stdout: trio.abc.ReceiveStream,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    transport: Transport,
) -> None:
    """One JSON-RPC message per line to the session. A line that is not one is logged
    and skipped (a server printing to stdout by mistake); one past MAX_MESSAGE ends the
    connection rather than grow without bound."""
    buffer = bytearray()
    skipped = [0]  # lines that were not JSON-RPC
    async with to_session:
        async for chunk in stdout:
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                if line.strip():
                    await _deliver(line, to_session, skipped)
            if len(buffer) > MAX_MESSAGE:
                transport.end(f"the server sent a message over {MAX_MESSAGE // 2**20} MB")
                return


async def _deliver(
    line: bytes, to_session: MemoryObjectSendStream[SessionMessage | Exception], skipped: list[int]
) -> None:
    try:
        message = types.JSONRPCMessage.model_validate_json(line)
    except ValueError:
        skipped[0] += 1
        if skipped[0] in (1, 10, 100) or skipped[0] % 1000 == 0:  # a chatty server: a few
            log.warning(
                "an MCP server wrote a line that is not JSON-RPC (%d so far): %.200r",
                skipped[0],
                line,
            )
        return
    await to_session.send(SessionMessage(message))


async def _write_lines(
    from_session: MemoryObjectReceiveStream[SessionMessage],
    stdin: trio.abc.SendStream,
    transport: Transport,
) -> None:
    async with from_session:
        async for item in from_session:
            data = item.message.model_dump_json(by_alias=True, exclude_none=True)
            try:
                await stdin.send_all(data.encode() + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                transport.end("the server closed its input")
                return


@contextlib.asynccontextmanager
async def http_transport(
    config: McpServerConfig, headers: Mapping[str, str]
) -> AsyncIterator[Transport]:
    """A Streamable HTTP session with the server at `config.url`."""
    assert config.url is not None
    ended = trio.Event()
    watched = _Watched(httpx.AsyncHTTPTransport(), ended)
    client = httpx.AsyncClient(
        headers=dict(headers), timeout=HTTP_TIMEOUT, trust_env=False, transport=watched
    )
    async with client, streamable_http_client(config.url, http_client=client) as streams:
        read, write, _session_id = streams
        transport = Transport(read, write, ended, watched.why)  # it may have failed already
        watched.transport = transport
        yield transport


class _Watched(httpx.AsyncBaseTransport):
    """The session's POSTs (its requests and their answers), watched: a failure to
    connect, or an answer cut off mid-stream, ends the connection. (The SDK logs such
    failures and leaves the call that was waiting on the answer waiting.) Its GET stream
    of server messages is the SDK's to reconnect; a quiet server is found by the ping."""

    def __init__(self, inner: httpx.AsyncBaseTransport, ended: trio.Event) -> None:
        self.inner = inner
        self.ended = ended
        self.transport: Transport | None = None  # set once the session's streams exist
        self.why = ""

    def failed(self, exc: httpx.TransportError) -> None:
        why = f"the connection failed: {type(exc).__name__}: {exc}"[:300]
        if self.transport is not None:
            self.transport.end(why)
        elif not self.ended.is_set():
            self.why = why
            self.ended.set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":  # the SDK's GET stream reconnects by itself
            return await self.inner.handle_async_request(request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self.failed(exc)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_WatchedStream(response.stream, self),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _WatchedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, watch: _Watched) -> None:
        self.inner = inner
        self.watch = watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                yield chunk
        except httpx.TransportError as exc:
            self.watch.failed(exc)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()
