"""Starting Chromium so that it cannot bypass hermes's proxy, as a terminal-layer process
tree (hermes.terminal.command.spawned: its own session, the whole tree killed when the block
ends by any way, marked so the next serve kills a tree a SIGKILLed one left behind).

The control channel is `--remote-debugging-pipe` (Chromium's fds 3 and 4), not a port:
no other local process can connect to it. Its network is the proxy on a loopback port
(hermes.terminal.backends.proxy) and nothing else: `--proxy-bypass-list=<-loopback>`
(otherwise Chromium sends loopback direct), no QUIC, no WebRTC UDP outside the proxy, and
a resolver that answers every name NOTFOUND (the proxy resolves), so no request of a page,
a frame, a script, an XHR or a WebSocket leaves except through the proxy's address rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs
import trio

from hermes.actors.errors import Unavailable
from hermes.agent.browser.cdp import Cdp
from hermes.terminal.backends.base import BackendUnavailable, Launch
from hermes.terminal.backends.proxy import Policy
from hermes.terminal.backends.sandbox import PROXY_PORT, Sandbox
from hermes.terminal.command import spawned

INSTALL = "apt-get install chromium"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PATH = "/usr/local/bin:/usr/bin:/bin"
LOG_LINES = 20  # of Chromium's own output, kept to say why it failed
# Moves our two pipe ends to 3 and 4 (bash takes fd numbers above 9; sh does not).
FD_SHUFFLE = 'exec 3<&"$1" 4>&"$2" {r}<&- {w}>&-; shift 2; exec "$0" "$@"'
FIRST_FREE_FD = 10  # above 3 and 4, so the shuffle never closes what it just made


class BrowserUnavailable(Unavailable):
    """No browser can run here: Chromium is missing, or it did not start (why)."""


def find_chromium(executable: str | None = None) -> str:
    """The Chromium to run: `executable` (browser.executable), else the first of
    CANDIDATES on PATH; BrowserUnavailable with the install line when there is none."""
    for name in (executable,) if executable else CANDIDATES:
        found = shutil.which(name)
        if found is not None:
            return found
    what = executable or "chromium"
    raise BrowserUnavailable(f"{what} is not installed ({INSTALL})")


def chromium_flags(profile: Path, proxy_port: int, confined: bool = False) -> list[str]:
    """The command line that leaves Chromium no way out but the proxy. `confined`: it runs
    inside bubblewrap, which is its sandbox (Chromium's own cannot start there: bubblewrap
    sets no_new_privs, so no setuid helper, and nested user namespaces may be off)."""
    flags = [
        "--headless=new",
        "--remote-debugging-pipe",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={profile}",
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--disable-quic",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--dns-prefetch-disable",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--disable-features=DnsOverHttps,NetworkPrediction,MediaRouter,OptimizationHints,"
        "BackForwardCache",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-breakpad",
        "--no-pings",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--mute-audio",
        "--hide-scrollbars",
        "--window-size=1280,900",
    ]
    if confined or os.geteuid() == 0:  # nor will it run its own sandbox as root
        flags.append("--no-sandbox")
    return flags


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FIRST_FREE_FD)
    os.close(fd)
    return moved


def chromium_launch(
    executable: str, flags: Sequence[str], cwd: Path, env: dict[str, str]
) -> tuple[Launch, int, int]:
    """The Launch that starts Chromium with a pipe on its fds 3 (commands) and 4 (answers),
    and our ends of them: (launch, write end, read end)."""
    commands_in, commands_out = os.pipe()
    answers_in, answers_out = os.pipe()
    theirs_r, theirs_w = _high(commands_in), _high(answers_out)
    script = FD_SHUFFLE.format(r=theirs_r, w=theirs_w)
    argv = ("bash", "-c", script, executable, str(theirs_r), str(theirs_w), *flags, "about:blank")
    launch = Launch(argv, cwd, env, pass_fds=(theirs_r, theirs_w))
    return launch, commands_out, answers_in


@attrs.define
class Running:
    """A started Chromium: its connection, and the last lines it printed."""

    cdp: Cdp
    said: list[str] = attrs.Factory(list)
    pid: int | None = None


@contextlib.asynccontextmanager
async def running_chromium(
    executable: str,
    profile: Path,
    proxy: Policy | int,
    cwd: Path,
    sandbox: Sandbox | None = None,
) -> AsyncIterator[Running]:
    """Chromium for the block, its connection ready; the whole tree killed after (by any
    way out of the block). BrowserUnavailable when it does not answer. `proxy`: the port
    of the proxy on this machine's loopback; or, with `sandbox`, the rules of the proxy
    the sandbox runs beside it (its `public` network, on 127.0.0.1:PROXY_PORT inside),
    `cwd` its one writable directory."""
    env = {"PATH": PATH, "HOME": str(profile), "LANG": "C.UTF-8"}
    if sandbox is None:
        assert isinstance(proxy, int)
        launch, ours_w, ours_r = chromium_launch(
            executable, chromium_flags(profile, proxy), cwd, env
        )
    else:
        assert isinstance(proxy, Policy)
        flags = chromium_flags(profile, PROXY_PORT, confined=True)
        inner, ours_w, ours_r = chromium_launch(executable, flags, cwd, env)
        try:
            launch = sandbox.confine(
                inner.argv, cwd, env, "public", policy=proxy, pass_fds=inner.pass_fds
            )
        except BackendUnavailable as exc:
            inner.discard()
            os.close(ours_w)
            os.close(ours_r)
            raise BrowserUnavailable(f"Chromium cannot run in the sandbox: {exc}") from None
    send = trio.lowlevel.FdStream(ours_w)
    receive = trio.lowlevel.FdStream(ours_r)
    async with send, receive:
        async with spawned(launch) as child:
            cdp = Cdp(send, receive)
            running = Running(cdp, pid=child.process.pid)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_keep_last, child.process.stdout, running.said)
                nursery.start_soon(cdp.reader)
                try:
                    await cdp.send("Browser.getVersion", timeout=30.0)
                except Exception as exc:
                    said = "; ".join(running.said[-3:])
                    raise BrowserUnavailable(f"Chromium did not start: {exc} ({said})") from None
                try:
                    yield running
                finally:
                    nursery.cancel_scope.cancel()


async def _keep_last(stream: trio.abc.ReceiveStream | None, lines: list[str]) -> None:
    """Chromium's output, read so it never blocks on a full pipe; the last lines kept."""
    if stream is None:
        return
    tail = b""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while piece := await stream.receive_some(65_536):
            tail = (tail + piece)[-8192:]
            lines[:] = tail.decode(errors="replace").splitlines()[-LOG_LINES:]
