"""A browser's downloads: into the session's `downloads` directory, each capped as a file
a chat sends is (`media.max_file_mb`).

Chromium names each file by its download's guid while it runs (`allowAndName`), so the
watcher knows which file is whose: one past the cap (by its announced size or by what
arrived) is cancelled and its partial file deleted (again at each answer and when the
browser closes: Chromium may write it a moment after its cancel); one that completes is
renamed to its suggested name. What happened is kept until the next tool answer lists it.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import attrs
import trio

from hermes.adapters.media import safe_name
from hermes.agent.browser.cdp import Cdp, CdpClosed, CdpError, Event

NOTES_KEPT = 20  # between two answers
SETTLE_SECONDS = 10.0  # a tool's answer waits this long for a download it started


@attrs.define
class Download:
    guid: str
    name: str  # the suggested file name, made safe
    url: str
    done: bool = False


@attrs.define(eq=False)
class Downloads:
    """The downloads of one browser, into `directory`, at most `max_bytes` each."""

    directory: Path
    max_bytes: int
    running: dict[str, Download] = attrs.Factory(dict)
    notes: list[dict[str, Any]] = attrs.Factory(list)
    discarded: set[str] = attrs.Factory(set)  # guids whose partial files are deleted
    changed: trio.Event = attrs.Factory(trio.Event)

    async def watch(
        self, cdp: Cdp, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Allow downloads into the directory (started: from now on) and keep them within
        the cap while the browser runs (Browser.downloadWillBegin, .downloadProgress)."""
        await cdp.send(
            "Browser.setDownloadBehavior",
            {
                "behavior": "allowAndName",
                "downloadPath": str(self.directory),
                "eventsEnabled": True,
            },
        )
        cdp.listeners.append(self._begin)  # at once: an answer waits for what began
        task_status.started()
        with contextlib.suppress(CdpClosed):
            while True:
                event = await cdp.wait_for("Browser.downloadProgress", math.inf)
                if event is not None:  # None only after an infinite wait
                    await self._progress(cdp, event)

    def _begin(self, event: Event) -> None:
        if event.method != "Browser.downloadWillBegin":
            return
        guid = str(event.params.get("guid", ""))
        name = safe_name(str(event.params.get("suggestedFilename") or "download"))
        self.running[guid] = Download(guid, name, str(event.params.get("url", ""))[:300])

    async def _progress(self, cdp: Cdp, event: Event) -> None:
        guid = str(event.params.get("guid", ""))
        download = self.running.get(guid)
        if download is None or download.done:
            return
        state = event.params.get("state")
        size = max(
            int(event.params.get("receivedBytes") or 0), int(event.params.get("totalBytes") or 0)
        )
        if state == "inProgress" and size <= self.max_bytes:
            return
        download.done = True
        partial = self.directory / guid
        if state == "completed" and size <= self.max_bytes:
            path = await trio.to_thread.run_sync(self._keep, partial, download.name)
            note: dict[str, Any] = {"state": "saved", "path": str(path), "bytes": size}
        else:
            if state == "inProgress":
                with contextlib.suppress(CdpError):
                    await cdp.send("Browser.cancelDownload", {"guid": guid})
            self.discarded.add(guid)
            await trio.to_thread.run_sync(self.sweep)
            note = {"state": "cancelled by the page"}
            if size > self.max_bytes:
                note["state"] = (
                    f"refused: over media.max_file_mb ({self.max_bytes / 2**20:g} MB);"
                    " cancelled and its partial file deleted"
                )
        del self.running[guid]  # before the note wakes `settled`
        self._note(download, note)

    def _keep(self, partial: Path, name: str) -> Path:
        """The finished file under its own name (a new one where that is taken)."""
        target = self.directory / name
        stem, suffix = target.stem, target.suffix
        n = 1
        while target.exists():
            n += 1
            target = self.directory / f"{stem}-{n}{suffix}"
        partial.rename(target)
        return target

    def _note(self, download: Download, note: dict[str, Any]) -> None:
        if len(self.notes) < NOTES_KEPT:
            self.notes.append({"file": download.name, "url": download.url, **note})
        self.changed.set()
        self.changed = trio.Event()

    async def settled(self, timeout: float = SETTLE_SECONDS) -> None:
        """Until no download runs, or `timeout`."""
        with trio.move_on_after(timeout):
            while self.running:
                await self.changed.wait()
        if self.discarded:
            await trio.to_thread.run_sync(self.sweep)

    def sweep(self) -> None:
        """Delete the partial files of cancelled and refused downloads."""
        for guid in self.discarded:
            for name in (guid, guid + ".crdownload"):
                (self.directory / name).unlink(missing_ok=True)

    def take_notes(self) -> list[dict[str, Any]]:
        """What became of downloads since the last call (and those still running)."""
        taken, self.notes = self.notes, []
        taken += [
            {"file": d.name, "url": d.url, "state": "downloading"} for d in self.running.values()
        ]
        return taken
