"""A real MCP server for the tests, written with the official `mcp` SDK's FastMCP, and
the test side that watches it.

The server runs in its own process, as a user's MCP server does:

    python -m tests.fakes.mcp_server --transport stdio [--name echo] [--report HOST:PORT]
    python -m tests.fakes.mcp_server --transport http  [--name echo] [--report HOST:PORT]

(`server_command` builds the same command to run from any directory.) Over stdio its
stdout is the protocol, so it logs to stderr only. Over Streamable HTTP it binds
127.0.0.1 on a free port itself, prints `PORT <n>` on stdout once it listens, and serves
FastMCP's default endpoint `/mcp`.

Its tools: `echo`, `slow` (cancellable), `grow` (adds a tool, sends
`notifications/tools/list_changed`), `spawn_child` (a grandchild `sleep 30`), `die`
(the process ends mid-call), `picture` (a PNG) and `document` (an embedded text
resource).

With `--report`, the server tells the test what happened to it, one line each over one
TCP connection (each line is sent whole before the server goes on, so none is lost to
a death that follows it):

    started <pid>              the server process is up
    slow started <request id>  `slow` began waiting
    slow done                  `slow` finished its wait
    cancelled                  `slow` was cancelled by the client's notifications/cancelled
    aborted                    `slow` was cancelled by its transport closing instead
    grew <name>                `grow` added the tool <name>
    child <pid>                `spawn_child` started `sleep 30` as <pid>
    dying                      `die` is about to end the process

The test side: `open_reports()` listens for those lines (`Reports`), and
`http_server()` runs the HTTP server as a subprocess for the length of a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import attrs
import trio
import uvicorn
from mcp import types
from mcp.server.fastmcp import Context, FastMCP, Image

DOCUMENT_URI = "memo://fake/document.txt"
DOCUMENT_TEXT = "A text resource.\nIt has two lines."
CHILD_SECONDS = 30  # how long `spawn_child`'s grandchild sleeps


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _one_pixel_png() -> bytes:
    """A valid 1x1 red PNG, built here (no file, no imaging library)."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


PICTURE_PNG = _one_pixel_png()


# -- the server -------------------------------------------------------------------------


class Reporter:
    """The server's line to the test: one TCP connection, each line written whole before
    the call returns (a blocking send, usable in a cancelled handler and right before
    `os._exit`). Every line goes to stderr too; without an address, or once the test
    stopped listening, only there."""

    def __init__(self, address: str | None) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        if address:
            host, _, port = address.rpartition(":")
            self._sock = socket.create_connection((host, int(port)))

    def __call__(self, line: str) -> None:
        print(f"mcp fake: {line}", file=sys.stderr, flush=True)
        with self._lock:
            if self._sock is None:
                return
            try:
                self._sock.sendall(line.encode() + b"\n")
            except OSError:  # the test is gone: nobody to tell
                self._sock.close()
                self._sock = None


def _cancelled_by_client(ctx: Context) -> bool:
    """Whether the request was cancelled by the client's `notifications/cancelled` (the
    SDK then cancels the request's own scope: `RequestResponder.cancel`), not by its
    transport closing (which cancels every handler of the session at once). The SDK
    shows this on the request's responder only, kept in its private in-flight table."""
    responder = ctx.session._in_flight.get(ctx.request_context.request_id)
    return responder is not None and responder.cancelled


def build_server(name: str, report: Reporter) -> FastMCP:
    server = FastMCP(name, log_level="WARNING")
    children: list[subprocess.Popen[bytes]] = []  # kept, not waited for

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Wait `seconds`, then return "done"."""
        report(f"slow started {ctx.request_context.request_id}")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            report("cancelled" if _cancelled_by_client(ctx) else "aborted")
            raise
        report("slow done")
        return "done"

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called `name` that echoes its text, and tell the client."""

        def grown(text: str) -> str:
            return text

        server.add_tool(grown, name=name, description=f"Echo the text ({name}, grown).")
        report(f"grew {name}")
        # Sent on this request's own stream: over HTTP a notification related to no
        # request goes to the client's GET stream, which may not be open yet.
        await ctx.session.send_notification(
            types.ServerNotification(types.ToolListChangedNotification()),
            related_request_id=ctx.request_context.request_id,
        )
        return f"added {name}"

    @server.tool()
    def spawn_child() -> str:
        """Start `sleep 30` as a child of this server; return its pid."""
        sleep = shutil.which("sleep") or "/bin/sleep"
        child = subprocess.Popen(
            [sleep, str(CHILD_SECONDS)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        children.append(child)
        report(f"child {child.pid}")
        return str(child.pid)

    @server.tool()
    def die() -> str:
        """End this server at once, in the middle of this call."""
        report("dying")
        os._exit(1)

    @server.tool(structured_output=False)
    def picture() -> Image:
        """A 1x1 PNG."""
        return Image(data=PICTURE_PNG, format="png")

    @server.tool(structured_output=False)
    def document() -> types.EmbeddedResource:
        """A text resource, embedded."""
        return types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=DOCUMENT_URI, mimeType="text/plain", text=DOCUMENT_TEXT
            ),
        )

    return server


def serve_http(server: FastMCP) -> None:
    """Serve Streamable HTTP on a socket bound here first (its port is known before
    uvicorn starts: no race for it), printing `PORT <n>` once it listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        server.streamable_http_app(), log_config=None, log_level="warning", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.mcp_server", description="An MCP server for the tests."
    )
    parser.add_argument("--transport", choices=("stdio", "http"), required=True)
    parser.add_argument("--name", default="echo", help="the server's name (default echo)")
    parser.add_argument("--report", metavar="HOST:PORT", help="where to report events")
    args = parser.parse_args()
    report = Reporter(args.report)
    server = build_server(args.name, report)
    report(f"started {os.getpid()}")
    if args.transport == "stdio":
        server.run("stdio")
    else:
        serve_http(server)


# -- the test side ----------------------------------------------------------------------


def server_command(transport: str, name: str = "echo", report: str | None = None) -> list[str]:
    """The command that runs this server, from any working directory and environment
    (`-P`: the file's own directory is not put on sys.path, where the other fakes'
    module names would hide real packages)."""
    command = [sys.executable, "-P", str(Path(__file__).resolve())]
    command += ["--transport", transport, "--name", name]
    return command + (["--report", report] if report else [])


class Reports:
    """The lines the server reported, in the order they arrived."""

    def __init__(self, address: str) -> None:
        self.address = address  # "127.0.0.1:PORT", for --report
        self.lines: list[str] = []
        self._arrived = trio.Event()  # set (and replaced) on each line

    def _add(self, line: str) -> None:
        self.lines.append(line)
        self._arrived.set()
        self._arrived = trio.Event()

    async def until(self, prefix: str, nth: int = 1) -> str:
        """The `nth` line starting with `prefix`, once it has arrived (a server restarted
        reports `started` again: `nth=2`)."""
        while True:
            found = [line for line in self.lines if line.startswith(prefix)]
            if len(found) >= nth:
                return found[nth - 1]
            await self._arrived.wait()

    async def _receive(self, stream: trio.SocketStream) -> None:
        buffer = b""
        try:
            async for data in stream:
                *lines, buffer = (buffer + data).split(b"\n")
                for line in lines:
                    self._add(line.decode())
        except trio.BrokenResourceError:  # the server died: what it sent is kept
            pass
        if buffer:
            self._add(buffer.decode())


@asynccontextmanager
async def open_reports() -> AsyncIterator[Reports]:
    """Listen on 127.0.0.1 for servers' reports while the block runs."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    reports = Reports(f"127.0.0.1:{port}")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, reports._receive, listeners)
        try:
            yield reports
        finally:
            nursery.cancel_scope.cancel()


@attrs.frozen
class HttpServer:
    url: str  # http://127.0.0.1:<port>/mcp
    proc: subprocess.Popen[str]


@contextmanager
def http_server(name: str = "echo", report: str | None = None) -> Iterator[HttpServer]:
    """The HTTP server running in its own process group while the block runs; killed
    with everything it started at the end. Blocks until the server listens."""
    proc = subprocess.Popen(
        server_command("http", name, report),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the MCP server did not start: {line!r}, exit {proc.poll()}")
        yield HttpServer(f"http://127.0.0.1:{int(line.split()[1])}/mcp", proc)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is gone already
            pass
        proc.wait()
        proc.stdout.close()


if __name__ == "__main__":
    main()
