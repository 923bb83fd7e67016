"""The browsers of a serve: at most `browser.max` at once, one per session that uses one,
each closed after `browser.idle_seconds` unused, with a `/stop` or a newer message that
cut one of its actions, and with serve (a drain cancels the node, and every browser's
process tree is killed with it).

Each browser is a task of this node's nursery: its proxy (the address rules and
`web.allow_private`: what web_fetch may reach), its Chromium (a terminal-layer process
tree) with a profile under the session's own directory, removed when it closes, and its
downloads into that directory, capped as media are (`media.max_file_mb`). The
refusals of its proxy and what became of its downloads are kept until the next tool answer
lists them. An owner's Chromium runs on this machine, its proxy on a loopback port; a
user's runs inside the sandbox (hermes.terminal.backends.sandbox), the proxy its `public`
network: it sees the session's directory and the system read-only, never HERMES_HOME.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.actors.actor import Actor
from hermes.actors.errors import Unavailable
from hermes.agent.browser.chromium import BrowserUnavailable, find_chromium, running_chromium
from hermes.agent.browser.downloads import Downloads
from hermes.agent.browser.page import Page
from hermes.agent.browser.settings import BrowserConfig
from hermes.home import make_private_dir
from hermes.terminal.addresses import AllowList
from hermes.terminal.backends.proxy import Policy, Refused, serve_proxy_tcp
from hermes.terminal.backends.sandbox import Sandbox

log = logging.getLogger(__name__)

PROFILE = "browser-profile"
DOWNLOADS = "downloads"
REFUSALS_KEPT = 50  # between two answers; more are counted
HOST_CHARS = 255  # of a refused request's host, in an answer (a name is at most that)
CLOSE_SECONDS = 10.0
NOTE = "the agent's browser reaches public addresses and web.allow_private only"


class BrowserBusy(Unavailable):
    """Every one of `browser.max` browsers is in use."""


@attrs.define(eq=False)
class Browser:
    """One session's browser while it runs."""

    session_id: str
    directory: Path  # the session's own directory
    sandbox: Sandbox | None = None  # Chromium runs inside it (a user's browser)
    page: Page | None = None
    downloads: Downloads | None = None
    used: float = 0.0  # trio time of its last action's end
    lock: trio.Lock = attrs.Factory(trio.Lock)
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    closed: trio.Event = attrs.Factory(trio.Event)
    refused: list[Refused] = attrs.Factory(list)
    dropped: int = 0  # refusals past REFUSALS_KEPT since the last answer

    @property
    def profile(self) -> Path:
        return self.directory / PROFILE

    def note_refusal(self, refusal: Refused) -> None:
        if len(self.refused) < REFUSALS_KEPT:
            self.refused.append(refusal)
        else:
            self.dropped += 1

    def take_refusals(self) -> list[dict[str, Any]]:
        """The requests its proxy refused since the last call, for a tool's answer."""
        taken = [{"host": r.host[:HOST_CHARS], "port": r.port, "why": r.why} for r in self.refused]
        if self.dropped:
            taken.append({"more": self.dropped})
        self.refused, self.dropped = [], 0
        return taken


class Browsers:
    """The serve's browsers; `node` is its tree's child that runs them."""

    def __init__(self, config: BrowserConfig, allow: AllowList, max_download: int) -> None:
        """`max_download`: the most one download may hold, in bytes (media.max_file_mb)."""
        self.config = config
        self.allow = allow
        self.max_download = max_download
        self._nursery: trio.Nursery | None = None
        self._open: dict[str, Browser] = {}
        self._starting = 0
        self._starts: dict[str, trio.Lock] = {}  # by session, while one is being got

    def node(self) -> BrowsersNode:
        """The serve tree's `browsers` child (a fresh one each time it starts)."""
        return BrowsersNode(self)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Browsers may be opened during the block; all are closed at its end."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def serve_in(self, nursery: trio.Nursery | None) -> None:
        """Open browsers in `nursery` from now on (None: open no more)."""
        self._nursery = nursery

    def current(self, session_id: str) -> Browser | None:
        return self._open.get(session_id)

    def count(self) -> int:
        return len(self._open)

    async def get(
        self, session_id: str, directory: Path, sandbox: Sandbox | None = None
    ) -> Browser:
        """The session's browser, started (in `directory`) if it has none; with `sandbox`
        (a user's), one confined in it: an unconfined one the session has (an owner's) is
        closed first. One at a time per session: two calls of one reply (run at once) get
        the one browser."""
        lock = self._starts.setdefault(session_id, trio.Lock())
        try:
            async with lock:
                return await self._get(session_id, directory, sandbox)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._starts.pop(session_id, None)

    async def _get(self, session_id: str, directory: Path, sandbox: Sandbox | None) -> Browser:
        found = self._open.get(session_id)
        if found is not None and (sandbox is None or found.sandbox is not None):
            return found
        if found is not None:
            await self.close(session_id)
        if self._nursery is None:
            raise BrowserUnavailable("the browser runs only inside hermes serve")
        if len(self._open) + self._starting >= self.config.max:
            raise BrowserBusy(
                f"{self.config.max} browsers are open already (browser.max); try again when"
                " one closes (each closes after browser.idle_seconds unused)"
            )
        executable = find_chromium(self.config.executable)
        self._starting += 1
        try:
            browser = Browser(session_id, directory, sandbox)
            return await self._nursery.start(self._run, browser, executable)
        except BaseExceptionGroup as group:  # a failure to start: its own error, unwrapped
            raise _first_leaf(group) from None
        finally:
            self._starting -= 1

    async def close(self, session_id: str) -> bool:
        """Close the session's browser; whether it had one."""
        browser = self._open.get(session_id)
        if browser is None:
            return False
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_SECONDS):
            browser.scope.cancel()
            await browser.closed.wait()
        return True

    async def _run(
        self,
        browser: Browser,
        executable: str,
        task_status: trio.TaskStatus[Browser] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        downloads = browser.directory / DOWNLOADS
        started = False
        try:
            await trio.to_thread.run_sync(_fresh_dirs, browser.profile, downloads)
            with browser.scope:
                async with trio.open_nursery() as nursery:
                    policy = Policy(self.allow, browser.note_refusal, NOTE)
                    proxy = policy  # the sandbox runs it beside Chromium
                    if browser.sandbox is None:
                        proxy = await nursery.start(serve_proxy_tcp, policy)
                    async with running_chromium(
                        executable, browser.profile, proxy, browser.directory, browser.sandbox
                    ) as chromium:
                        browser.downloads = Downloads(downloads, self.max_download)
                        await nursery.start(browser.downloads.watch, chromium.cdp)
                        browser.page = await Page.attach(chromium.cdp)
                        browser.used = trio.current_time()
                        self._open[browser.session_id] = browser
                        task_status.started(browser)
                        started = True
                        await self._until_idle(browser, chromium.cdp)
                    nursery.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise  # to the caller of `get`
            log.warning("the browser of %s failed: %s", browser.session_id, exc)
        finally:
            if self._open.get(browser.session_id) is browser:
                del self._open[browser.session_id]
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, browser.profile, True)
                if browser.downloads is not None:
                    await trio.to_thread.run_sync(browser.downloads.sweep)
            browser.closed.set()

    async def _until_idle(self, browser: Browser, cdp: Any) -> None:
        """Return once the browser was unused for `idle_seconds` (or Chromium went away)."""
        idle = self.config.idle_seconds
        while cdp.closed is None:
            with trio.move_on_at(browser.used + idle):
                await cdp.until_closed()
            async with browser.lock:  # an action in progress finishes first
                if trio.current_time() >= browser.used + idle:
                    return


def _fresh_dirs(profile: Path, downloads: Path) -> None:
    shutil.rmtree(profile, ignore_errors=True)  # a profile left by a killed serve
    make_private_dir(profile)
    make_private_dir(downloads)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class BrowsersNode(Actor):
    """The serve tree's child that runs the browsers: a drain closes them all."""

    def __init__(self, browsers: Browsers) -> None:
        super().__init__("browsers")
        self.browsers = browsers

    async def on_start(self) -> None:
        self.browsers.serve_in(self.nursery)

    async def flush(self) -> None:
        self.browsers.serve_in(None)

    async def handle(self, msg: Any) -> Any:
        raise TypeError(f"browsers cannot handle {type(msg).__name__}")
