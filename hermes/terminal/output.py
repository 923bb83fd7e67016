"""Bounded capture of a command's output: head and tail in memory, the rest on disk.

The cap is enforced while reading, so a command that prints gigabytes costs a
file on disk, not memory. The kept text is the first 40% and the last 60% of
the cap, with a marker saying how much was cut.
"""

from __future__ import annotations

import os
import re
import secrets
from collections import deque
from pathlib import Path
from typing import TextIO

DEFAULT_CAP = 50_000
HEAD_SHARE = 0.4

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


class BoundedOutput:
    """Collects text; keeps the head and the tail within `cap` characters.

    Once the output outgrows the cap, all of it (from the first character) is
    also written to a private file in `spill_dir`, named by `full_path`.
    """

    def __init__(self, cap: int = DEFAULT_CAP, spill_dir: Path | None = None) -> None:
        self.cap = cap
        self.head_cap = int(cap * HEAD_SHARE)
        self.tail_cap = cap - self.head_cap
        self.total = 0
        self._all: list[str] | None = []  # everything, until the cap is passed
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._spill_dir = spill_dir
        self._spill: TextIO | None = None
        self.full_path: Path | None = None

    def write(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        if self._all is not None:
            self._all.append(text)
            if self.total > self.cap:
                if self._spill_dir is not None:
                    self._open_spill()
                    self._spill.write("".join(self._all))
                self._all = None
        elif self._spill is not None:
            self._spill.write(text)
        room = self.head_cap - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(text[:room])
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail and self._tail_len - len(self._tail[0]) >= self.tail_cap:
                self._tail_len -= len(self._tail.popleft())

    def _open_spill(self) -> None:
        self._spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._spill_dir / f"output-{secrets.token_hex(6)}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._spill = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        self.full_path = path

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        """The kept output: all of it, or head + a marker + tail."""
        if self._all is not None:
            return "".join(self._all)
        head = "".join(self._head)
        tail = "".join(self._tail)[-self.tail_cap :]
        cut = self.total - len(head) - len(tail)
        where = f"; full output: {self.full_path}" if self.full_path else ""
        return f"{head}\n\n[... {cut:,} characters cut{where} ...]\n\n{tail}"


class RingBuffer:
    """The last `size` characters of a stream, with absolute offsets for paging a log."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._text = ""
        self.total = 0

    def write(self, text: str) -> None:
        if text:
            self.total += len(text)
            self._text = (self._text + text)[-self.size :]

    @property
    def start(self) -> int:
        """The absolute offset of the oldest character still kept."""
        return self.total - len(self._text)

    def read(self, offset: int = 0, limit: int | None = None) -> str:
        begin = max(offset, self.start) - self.start
        end = len(self._text) if limit is None else min(len(self._text), begin + limit)
        return self._text[begin:end]

    def tail(self, n: int) -> str:
        return self._text[-n:]
