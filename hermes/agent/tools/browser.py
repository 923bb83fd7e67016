"""The browser tools: a session's headless Chromium (hermes.agent.browser), driven by the
model one action at a time.

Every answer is JSON with the page's URL and title, what the action found, `refused`:
the requests of the page (its frames, scripts, XHRs, WebSockets, redirects) the proxy
refused since the last answer, and `downloads`: files saved into the session's directory,
or refused past `media.max_file_mb`. What a page says is untrusted text: the turn is marked as
web_fetch marks it. A call cut by `/stop` or a newer message closes the browser (its page
may be anywhere). A user's (not an owner's) Chromium runs inside the sandbox; a user gets
no browser where there is none.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from hermes.actors.cancels import is_cancel
from hermes.actors.errors import Unavailable
from hermes.adapters.media import Saved
from hermes.agent.browser.browsers import Browsers
from hermes.agent.browser.cdp import CdpClosed, CdpError
from hermes.agent.browser.page import Page
from hermes.agent.tools.base import Tool, ToolContext, ToolError, capped, need, obj
from hermes.terminal.backends.sandbox import Sandbox

Action = Callable[[Page], Awaitable[dict[str, Any]]]
SCREENSHOTS = "browser"  # under the media cache: where a screenshot waits for the model

REF = {"type": "string", "description": "an element's reference from browser_snapshot (e12)"}


@attrs.frozen
class BrowserTool:
    """One browser tool: its name, what the model reads of it, and what it does."""

    name: str
    description: str
    parameters: dict[str, Any]
    act: Callable[[BrowserTool, dict[str, Any], ToolContext, Page], Awaitable[dict[str, Any]]]
    browsers: Browsers = attrs.field(eq=False, repr=False)
    multimodal: bool = False  # the model sees images: a screenshot is shown to it

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if self.name == "browser_close":
            had = await self.browsers.close(ctx.session_id)
            return json.dumps({"closed": had})
        if self.name == "browser_screenshot" and not self.multimodal:
            raise ToolError(
                "this model cannot see images (model.multimodal is off): read the page"
                " with browser_snapshot instead"
            )
        try:
            browser = await self.browsers.get(ctx.session_id, ctx.terminal.own, _sandbox(ctx))
        except Unavailable as exc:
            raise ToolError(str(exc)) from None
        try:
            async with browser.lock:
                try:
                    assert browser.page is not None
                    answer = await self.act(self, args, ctx, browser.page)
                    if browser.downloads is not None:  # what the action began: its end
                        await browser.downloads.settled()
                finally:
                    browser.used = trio.current_time()
        except BaseException as exc:
            if isinstance(exc, ToolError | CdpError):  # may quote the page (a list's options)
                ctx.took_in("a page in the browser (its error)")
            if is_cancel(exc) or isinstance(exc, CdpClosed):
                await self.browsers.close(ctx.session_id)  # shielded: cut mid-action
            if isinstance(exc, CdpClosed):
                raise ToolError(
                    f"the browser closed ({exc}); the next call opens a new one"
                ) from None
            if isinstance(exc, CdpError):
                raise ToolError(str(exc)) from None
            raise
        # A page's words are anyone's, and so are its title, what it refused and named.
        host = urlsplit(str(answer.get("url", ""))).hostname
        ctx.took_in(f"a page in the browser ({host or 'no address'})")
        refused = browser.take_refusals()
        downloads = browser.downloads.take_notes() if browser.downloads is not None else []
        return json.dumps(
            {
                **answer,
                **({"refused": refused} if refused else {}),
                **({"downloads": downloads} if downloads else {}),
            }
        )


def _sandbox(ctx: ToolContext) -> Sandbox | None:
    """Where a user's Chromium runs: the sandbox, as their commands (None: an owner's runs
    on this machine). ToolError when there is none."""
    if ctx.caller.role == "owner":
        return None
    placement = ctx.terminal.backends.place(ctx.caller.role, ctx.untrusted)
    if not isinstance(placement.backend, Sandbox):
        raise ToolError(f"a user's browser runs only in the sandbox: {placement.why}")
    return placement.backend


async def _open(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    url = str(need(args, "url"))
    if urlsplit(url).scheme not in ("http", "https"):
        raise ToolError(f"browser_open opens http:// and https:// URLs only, not {url!r}")
    return await page.open(url)


async def _snapshot(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    text = await page.snapshot()
    where = await page.where()
    ctx.took_in(f"a page in the browser ({urlsplit(where['url']).hostname or 'no host'})")
    return {**where, "snapshot": await trio.to_thread.run_sync(capped, text, ctx)}


async def _click(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    return await page.click(str(need(args, "ref")))


async def _type(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    text = args.get("text")
    if not isinstance(text, str):
        raise ToolError("missing argument 'text'")
    return await page.type(str(need(args, "ref")), text, bool(args.get("submit")))


async def _select(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    return await page.select(str(need(args, "ref")), str(need(args, "value")))


async def _scroll(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    return await page.scroll(str(args.get("direction") or "down"))


async def _back(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    return await page.back()


async def _screenshot(tool: BrowserTool, args: dict[str, Any], ctx: ToolContext, page: Page):
    if ctx.files is None:
        raise ToolError("this conversation has nowhere to keep a screenshot")
    data = await page.screenshot()
    name = f"screenshot-{secrets.token_hex(6)}.png"
    path = ctx.files.cache / SCREENSHOTS / name
    await trio.to_thread.run_sync(_write, path, data)
    ctx.show(Saved(name, "image/png", len(data), str(path), hashlib.sha256(data).hexdigest()))
    return {**await page.where(), "screenshot": "shown to you as an image"}


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(data)


def browser_tools(browsers: Browsers, multimodal: bool) -> dict[str, Tool]:
    """The browser_* tools over `browsers`; `multimodal`: the model sees a screenshot."""

    def tool(name: str, description: str, parameters: dict[str, Any], act: Any) -> BrowserTool:
        return BrowserTool(name, description, parameters, act, browsers, multimodal)

    tools = [
        tool(
            "browser_open",
            "Open a URL (http/https) in this conversation's browser, a real headless "
            "Chromium that runs the page's JavaScript. Then read it with browser_snapshot. "
            "Local and private network addresses are refused.",
            obj(["url"], url={"type": "string"}),
            _open,
        ),
        tool(
            "browser_snapshot",
            "The open page as an accessibility tree: one element a line, those you can act "
            "on with a reference such as [e12] for browser_click, browser_type and "
            "browser_select. References change with every snapshot.",
            obj([]),
            _snapshot,
        ),
        tool("browser_click", "Click an element.", obj(["ref"], ref=REF), _click),
        tool(
            "browser_type",
            "Type text into a field (what it held is replaced); submit=true presses Enter.",
            obj(["ref", "text"], ref=REF, text={"type": "string"}, submit={"type": "boolean"}),
            _type,
        ),
        tool(
            "browser_select",
            "Choose an option of a drop-down list by its value or its label.",
            obj(["ref", "value"], ref=REF, value={"type": "string"}),
            _select,
        ),
        tool(
            "browser_scroll",
            "Scroll the page by most of a screen.",
            obj([], direction={"type": "string", "enum": ["down", "up"]}),
            _scroll,
        ),
        tool("browser_back", "Go back to the previous page.", obj([]), _back),
        tool(
            "browser_screenshot",
            "A screenshot of what the browser shows, for a model that sees images.",
            obj([]),
            _screenshot,
        ),
        tool(
            "browser_close",
            "Close this conversation's browser (its cookies and history are deleted).",
            obj([]),
            None,
        ),
    ]
    return {t.name: t for t in tools}
