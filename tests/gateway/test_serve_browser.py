"""The agent's browser through a real `hermes serve` (the offline model's `/tool` lines,
the local endpoint's owner): `/stop` during a slow page ends its Chromium, and a Chromium
that outlives a SIGKILLed serve (its debugging pipe held open, so it does not quit by
itself) is killed by the next serve before it is ready; the session's next browser
starts cleanly on the profile the dead one left."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import psutil
import pytest
import trio

from hermes.agent.browser.browsers import PROFILE
from hermes.agent.offline import tool_line
from hermes.terminal.tree import ProcessId, descendant_pids
from tests.fakes.pages import FakePages
from tests.gateway.test_serve_end_to_end import Client, connect
from tests.gateway.test_serve_sandbox import gone, start_turn
from tests.processes import wait_ready

CHROMIUM = "/usr/bin/chromium"
SITE = "127.0.0.2"  # allowed through web.allow_private; 127.0.0.1 stays refused


@pytest.fixture
def pages(require_system):
    require_system(CHROMIUM, packages=("chromium",))
    with FakePages(SITE) as fake:
        yield fake
    assert fake.internal_errors == []


def chromium_of(serve_pid: int) -> list[ProcessId]:
    """The Chromium processes of serve's tree (its browser, zygotes, renderers)."""
    found = []
    for pid in descendant_pids(serve_pid):
        with contextlib.suppress(psutil.Error):
            if "chrom" in psutil.Process(pid).name() and (proc := ProcessId.of(pid)):
                found.append(proc)
    return found


async def browser_up(serve_pid: int) -> list[ProcessId]:
    with trio.fail_after(30):
        while not (found := chromium_of(serve_pid)):  # noqa: ASYNC110 (processes appear)
            await trio.sleep(0.05)
    return found


@contextlib.contextmanager
def pipe_held(tree: list[ProcessId]) -> Iterator[None]:
    """Hold both ends of the browser's debugging pipe (its fds 3 and 4, opened again through
    /proc), so the browser sees no end of it when serve dies: a Chromium that outlives serve."""
    main = next(p for p in tree if "--remote-debugging-pipe" in psutil.Process(p.pid).cmdline())
    held = [
        os.open(f"/proc/{main.pid}/fd/3", os.O_WRONLY | os.O_NONBLOCK),
        os.open(f"/proc/{main.pid}/fd/4", os.O_RDONLY | os.O_NONBLOCK),
    ]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)


def profiles(home) -> list:
    return sorted(home.workspace.glob(f"*/{PROFILE}"))


async def removed(home) -> None:
    """Until no session's profile is left (removed just after its Chromium ended)."""
    with trio.fail_after(30):
        while profiles(home):  # noqa: ASYNC110 (a directory goes)
            await trio.sleep(0.05)


@pytest.mark.timeout(120)
async def test_stop_and_a_sigkilled_serve_leave_no_chromium(home, spawn, pages):
    home.config_path.write_text(
        "gateway:\n  local:\n    port: 0\nops:\n  enabled: false\n"
        f"web:\n  allow_private: ['{SITE}']\n"
    )
    slow = pages.hold("/slow")
    url = pages.page("/", "<title>Open</title><p>still here</p>", "text/html")
    serve = spawn()
    port = await trio.to_thread.run_sync(wait_ready, serve)
    token = home.serve_token.read_text().strip()
    async with connect(port, token) as ws:
        # /stop during a slow page
        await start_turn(ws, "local_stop", tool_line("browser_open", url=slow))
        await trio.to_thread.run_sync(pages.wait_until, lambda f: "/slow" in f.requests)
        tree = await browser_up(serve.pid)
        async with connect(port, token) as other:
            stop = await Client(other).call("chat.send", {"text": "/stop", "session": "local_stop"})
        assert stop["result"]["text"] == "Stopped the running turn."
        await gone(tree)
        await removed(home)

        # serve killed outright with a browser open
        async with connect(port, token) as other:
            opened = await Client(other).call(
                "chat.send", {"text": tool_line("browser_open", url=url), "session": "local_kill"}
            )
        assert '"title": "Open"' in opened["result"]["text"]
        tree = await browser_up(serve.pid)
        [profile] = profiles(home)
    with pipe_held(tree):
        serve.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(serve.wait)
        assert all(p.alive() for p in tree)  # orphaned: what the next serve finds

        second = spawn()
        port = await trio.to_thread.run_sync(wait_ready, second)  # it kills them first
        assert not [p for p in tree if p.alive()]
    async with connect(port, token) as ws:
        again = await Client(ws).call(
            "chat.send", {"text": tool_line("browser_open", url=url), "session": "local_kill"}
        )
    assert '"title": "Open"' in again["result"]["text"]  # the left profile, started afresh
    assert profiles(home) == [profile]
    second.send_signal(signal.SIGTERM)
    assert await trio.to_thread.run_sync(second.wait) == 0
    assert profiles(home) == []  # a drain closed the browser, its profile removed
    assert pages.requests.count("/") == 2
