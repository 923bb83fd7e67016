"""What the browser tools do to a session's page, over CDP: open, read (the accessibility
snapshot), click, type, select, scroll, go back, take a screenshot.

Each action that may start a navigation waits, bounded, for the page to settle (its load
event), so the next snapshot reads the page the action led to.
"""

from __future__ import annotations

import base64
from typing import Any

from hermes.agent.browser.cdp import Cdp, CdpError
from hermes.agent.browser.snapshot import Refs, render
from hermes.agent.tools.base import ToolError

LOAD_SECONDS = 20.0  # a page's load event, at most
SETTLE_SECONDS = 0.3  # after a click or a submit: did it start a navigation?
SCREENSHOT_BYTES = 8 * 2**20
DOWNLOADED = "net::ERR_ABORTED"  # a navigation that became a download ends so
DOWNLOAD_BEGINS = 5.0  # seconds its download's start may take to be said
URL_CHARS, TITLE_CHARS = 2000, 300  # of a page's, in an answer

SELECT_JS = """function(value) {
  const options = Array.from(this.options || []);
  const hit = options.find(o => o.value === value) || options.find(o => o.label === value
    || o.text.trim() === value);
  if (!hit) return ("no option " + JSON.stringify(value) + "; the options: "
    + options.map(o => JSON.stringify(o.value)).join(", ")).slice(0, 2000);
  this.value = hit.value;
  this.dispatchEvent(new Event("input", {bubbles: true}));
  this.dispatchEvent(new Event("change", {bubbles: true}));
  return "";
}"""
CLEAR_JS = """function() {
  if ("value" in this) { this.value = ""; this.dispatchEvent(new Event("input", {bubbles: true})); }
  else if (this.isContentEditable) { this.textContent = ""; }
}"""


class Page:
    """The one page of a session's browser, attached as a flat CDP session."""

    def __init__(self, cdp: Cdp, session: str, target: str) -> None:
        self.cdp = cdp
        self.session = session
        self.target = target
        self.refs = Refs()

    @classmethod
    async def attach(cls, cdp: Cdp) -> Page:
        """The browser's first page, with what the tools need enabled."""
        targets = await cdp.send("Target.getTargets")
        pages = [t for t in targets.get("targetInfos", ()) if t.get("type") == "page"]
        if pages:
            target = pages[0]["targetId"]
        else:
            target = (await cdp.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        attached = await cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = cls(cdp, attached["sessionId"], target)
        await page.send("Page.enable")
        await page.send("Accessibility.enable")
        return page

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.cdp.send(method, params, self.session)

    # -- actions -------------------------------------------------------------------

    async def open(self, url: str) -> dict[str, Any]:
        self.cdp.taken("Page.loadEventFired")
        self.cdp.taken("Browser.downloadWillBegin")
        answer = await self.send("Page.navigate", {"url": url})
        if answer.get("errorText") == DOWNLOADED:  # its download's start may come after
            await self.cdp.wait_for("Browser.downloadWillBegin", DOWNLOAD_BEGINS)
        if answer.get("errorText"):
            return await self.where(error=answer["errorText"])
        await self._loaded()
        return await self.where()

    async def snapshot(self) -> str:
        tree = await self.send("Accessibility.getFullAXTree")
        text, self.refs = render(tree.get("nodes", ()))
        return text

    async def click(self, ref: str) -> dict[str, Any]:
        node = self._node(ref)
        x, y = await self._center(node)
        self._before_action()
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )
        await self._settle()
        return await self.where()

    async def type(self, ref: str, text: str, submit: bool) -> dict[str, Any]:
        node = self._node(ref)
        await self.send("DOM.focus", {"backendNodeId": node})
        await self._call(node, CLEAR_JS)
        await self.send("Input.insertText", {"text": text})
        if submit:
            self._before_action()
            for kind in ("keyDown", "keyUp"):
                await self.send(
                    "Input.dispatchKeyEvent",
                    {
                        "type": kind,
                        "key": "Enter",
                        "code": "Enter",
                        "windowsVirtualKeyCode": 13,
                        **({"text": "\r"} if kind == "keyDown" else {}),
                    },
                )
            await self._settle()
        return await self.where()

    async def select(self, ref: str, value: str) -> dict[str, Any]:
        problem = await self._call(self._node(ref), SELECT_JS, value)
        if problem:
            raise ToolError(f"browser_select: {problem}")
        return await self.where()

    async def scroll(self, direction: str) -> dict[str, Any]:
        amount = {"down": "innerHeight * 0.8", "up": "-innerHeight * 0.8"}.get(direction)
        if amount is None:
            raise ToolError(f"direction must be up or down, not {direction!r}")
        await self.send("Runtime.evaluate", {"expression": f"window.scrollBy(0, {amount})"})
        return await self.where()

    async def back(self) -> dict[str, Any]:
        history = await self.send("Page.getNavigationHistory")
        index = history["currentIndex"]
        if index <= 0:
            raise ToolError("there is no page to go back to")
        self.cdp.taken("Page.loadEventFired")
        entry = history["entries"][index - 1]["id"]
        await self.send("Page.navigateToHistoryEntry", {"entryId": entry})
        await self._loaded()
        return await self.where()

    async def screenshot(self) -> bytes:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        data = base64.b64decode(shot["data"])
        if len(data) > SCREENSHOT_BYTES:
            raise ToolError(f"the screenshot is over {SCREENSHOT_BYTES // 2**20} MB")
        return data

    async def where(self, error: str | None = None) -> dict[str, Any]:
        """The page's URL and title (and a navigation's error), for every answer: as the
        browser knows them, not as a script of the page would report them; capped."""
        found = await self.cdp.send("Target.getTargetInfo", {"targetId": self.target})
        info = found.get("targetInfo", {})
        url, title = str(info.get("url", ""))[:URL_CHARS], str(info.get("title", ""))[:TITLE_CHARS]
        return {"url": url, "title": title, **({"error": error} if error else {})}

    # -- helpers -------------------------------------------------------------------

    def _node(self, ref: str) -> int:
        node = self.refs.node(str(ref))
        if node is None:
            raise ToolError(f"no element {ref!r} in the latest snapshot: take a browser_snapshot")
        return node

    async def _center(self, node: int) -> tuple[float, float]:
        try:
            await self.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": node})
            box = await self.send("DOM.getBoxModel", {"backendNodeId": node})
        except CdpError as exc:
            raise ToolError(
                f"that element cannot be clicked ({exc}): take a new snapshot"
            ) from None
        quad = box["model"]["content"]
        return sum(quad[0::2]) / 4, sum(quad[1::2]) / 4

    async def _call(self, node: int, function: str, *args: str) -> Any:
        try:
            resolved = await self.send("DOM.resolveNode", {"backendNodeId": node})
        except CdpError as exc:
            raise ToolError(f"that element is gone ({exc}): take a new snapshot") from None
        answer = await self.send(
            "Runtime.callFunctionOn",
            {
                "objectId": resolved["object"]["objectId"],
                "functionDeclaration": function,
                "arguments": [{"value": a} for a in args],
                "returnByValue": True,
            },
        )
        return answer.get("result", {}).get("value")

    def _before_action(self) -> None:
        """Forget earlier loads: `_settle` waits for what this action starts."""
        self.cdp.taken("Page.frameStartedLoading")
        self.cdp.taken("Page.loadEventFired")

    async def _settle(self) -> None:
        """If the action started loading the page, wait for it to load (bounded)."""
        started = await self.cdp.wait_for("Page.frameStartedLoading", SETTLE_SECONDS)
        if started is not None:
            await self._loaded()

    async def _loaded(self) -> None:
        await self.cdp.wait_for("Page.loadEventFired", LOAD_SECONDS)
