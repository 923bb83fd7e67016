"""A turn's progress as a chat sees it, where the platform edits messages.

`stream`: the answer is written into one message as the model writes it, a line
for each tool under it while it runs; the final answer replaces it all.
`tools`: a status message lists each tool as it starts and finishes; the answer
comes as a message of its own. Either is written to the outbox (write_live) at
most once per `gateway.progress_interval`, and not before a turn has run that
long (a quick answer is one message, as with `off`); in `tools`, a tool's line shows
as it begins (no step comes while it runs). In `stream` the typing indicator says a
turn runs until its first interval has passed. Partial states go as plain
text, so a half-written fence or entity never makes the platform refuse an
edit; the final answer is formatted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from hermes.adapters.contract import StepKind, Target, TurnStep
from hermes.adapters.registry import PLATFORMS
from hermes.adapters.settings import PlatformConfig

RUNNING, DONE = "⏳", "✓"
TODO_TOOL = "todo"  # a tool whose result, the session's checklist, the message shows
STOPPED_NOTE = "\n\n(stopped)"


def progress_modes(
    platforms: Mapping[str, PlatformConfig], holds: Mapping[str, float]
) -> dict[str, str]:
    """Each platform's progress mode but `off` (`platforms`: the enabled ones): its
    `progress`, else `stream` where its adapter edits messages; `off` where a voice note
    replaces the text (`holds`: media.speak's, by platform)."""
    modes = {}
    for name, settings in platforms.items():
        if name in holds:
            continue
        known = PLATFORMS.get(name)
        mode = settings.progress or ("stream" if known is not None and known.edits else "off")
        if mode != "off":
            modes[name] = mode
    return modes


def status_key(answer_key: str) -> str:
    """The rows of a turn's status message (`tools`): beside its answer's."""
    return f"{answer_key}/tools"


@attrs.define
class LiveReply:
    """One turn's progress message: what it shows, and when it was last written."""

    target: Target
    key: str  # its outbox rows' key
    reply_to: str | None
    mode: str  # "tools" or "stream"
    began: float  # trio time the turn began
    written: float = -math.inf  # trio time of the last write
    shown: str = ""  # the text last written
    earlier: list[str] = attrs.Factory(list)  # the text of the model's earlier calls
    current: str = ""  # what the model writes now
    tools: dict[str, str] = attrs.Factory(dict)  # call id -> its line, in call order
    todo: str = ""  # the session's todo list as the todo tool last left it

    def take(self, step: TurnStep) -> None:
        if step.kind is StepKind.TEXT and self.mode == "stream":
            self.current += step.text
        elif step.kind is StepKind.TOOL_CALL:
            if self.current.strip():
                self.earlier.append(self.current)
            self.current = ""
            self.tools[step.call_id or str(len(self.tools))] = f"{RUNNING} {step.tool}"
        elif step.kind is StepKind.TOOL_RESULT and step.call_id in self.tools:
            note = f" ({step.note})" if step.note else ""
            self.tools[step.call_id] = f"{DONE} {step.tool}{note}"
            if step.tool == TODO_TOOL:  # its result is the list: shown under the lines
                self.todo = step.text

    def said(self) -> str:
        """What the model has written so far (no tool lines)."""
        return "\n\n".join(p.strip() for p in (*self.earlier, self.current) if p.strip())

    def text(self) -> str:
        lines = "\n".join(self.tools.values())
        if self.mode == "tools":
            return "\n\n".join(p for p in (lines, self.todo) if p)
        return "\n\n".join(p for p in (self.said(), lines, self.todo) if p)

    def due(self, now: float, interval: float, step: TurnStep) -> bool:
        """Whether to write now: there is something new to show, the last write is an
        interval old, and the turn has run an interval; in `tools`, also as a tool starts
        (it may run long, and no step comes while it does)."""
        if now - self.written < interval:  # cheap first: this runs for every token
            return False
        fresh = self.text()
        if not fresh or fresh == self.shown:
            return False
        starts = step.kind is StepKind.TOOL_CALL and self.mode == "tools"
        return starts or now - self.began >= interval
